"""Adapter routing and the start-up adapter compatibility check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config import GatewayConfig
from gateway.errors import GatewayError
from gateway.protocol import InvocationRequest
from gateway.routing import AdapterCompatibilityError, Router, check_adapters


def req(**fields: object) -> InvocationRequest:
    return InvocationRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **fields})


@pytest.mark.parametrize(
    ("fields", "adapter"),
    [
        ({"locale": "ja-JP"}, "jp_style"),
        ({"locale": "ja"}, "jp_style"),
        ({"locale": "jam"}, "manga_domain"),
        ({"intent": "refund"}, "general_support"),
        ({"intent": "refund", "locale": "ja_JP"}, "jp_style"),  # first match wins
        ({"intent": "recommendation"}, "manga_domain"),
        ({}, "manga_domain"),  # the default
        ({"adapter": "base"}, "base"),
        ({"model": "general_support", "locale": "ja-JP"}, "general_support"),  # explicit wins
    ],
)
def test_routes(config: GatewayConfig, fields: dict[str, object], adapter: str) -> None:
    assert Router(config.routing).resolve(req(**fields)) == adapter


def test_unknown_adapter_is_a_400_listing_the_valid_ones(config: GatewayConfig) -> None:
    with pytest.raises(GatewayError) as info:
        Router(config.routing).resolve(req(adapter="shonen_v9"))
    assert info.value.code.status == 400
    assert info.value.message == (
        "unknown adapter 'shonen_v9'; valid adapters: base, general_support, jp_style, manga_domain"
    )


def write_adapter(root: Path, name: str, rank: int, targets: list[str]) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "adapter_config.json").write_text(json.dumps({"r": rank, "target_modules": targets}))


def test_compatible_adapters_pass(tmp_path: Path) -> None:
    write_adapter(tmp_path, "a", 8, ["q_proj", "v_proj"])
    write_adapter(tmp_path, "b", 8, ["v_proj", "q_proj"])  # order does not matter
    assert {i.rank for i in check_adapters({"a": tmp_path / "a", "b": tmp_path / "b"}).values()} == {8}


def test_mismatched_adapters_fail_with_every_adapter_named(tmp_path: Path) -> None:
    write_adapter(tmp_path, "a", 8, ["q_proj", "v_proj"])
    write_adapter(tmp_path, "b", 16, ["q_proj", "v_proj"])
    with pytest.raises(AdapterCompatibilityError) as info:
        check_adapters({"a": tmp_path / "a", "b": tmp_path / "b"})
    assert "a: rank 8, target_modules ['q_proj', 'v_proj']; b: rank 16" in str(info.value)


def test_every_missing_adapter_is_named(tmp_path: Path) -> None:
    write_adapter(tmp_path, "a", 8, ["q_proj"])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "adapter_config.json").write_text("{not json")

    with pytest.raises(AdapterCompatibilityError) as info:
        check_adapters({"ghost": tmp_path / "ghost", "a": tmp_path / "a", "broken": tmp_path / "broken"})

    assert info.value.problems[0] == (
        f"adapter 'ghost': cannot read {tmp_path}/ghost/adapter_config.json: No such file or directory"
    )
    assert info.value.problems[1].startswith("adapter 'broken': cannot read")
    assert len(info.value.problems) == 2
