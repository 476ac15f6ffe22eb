"""Versioned adapters: checksums refused by adapter, adapter-only changes detected, the pointer round-trips."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetops.endpoint import EndpointSnapshot, VariantSnapshot
from fleetops.rollout.plan import RolloutPlan, build_plan
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.request_schema import RolloutInputError, parse_request
from fleetops.rollout.rollback import RollbackRequest, resolve_target
from fleetops.rollout.versions import AdapterVersion, Release, release_change
from fleetops.tables import REGISTRY_SK
from tests.conftest import load_event

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
PARAMETER = "/stack/models/manga-chat"


def request(**model_changes: Any) -> dict[str, Any]:
    sample: dict[str, Any] = load_event("rollout_validate")["request"]
    return sample | {"model": sample["model"] | model_changes}


def adapters(**changes: dict[str, str]) -> dict[str, Any]:
    """The sample's adapters with some entries replaced or changed."""
    current: dict[str, Any] = request()["model"]["adapters"]
    return {name: current.get(name, {}) | changes.get(name, {}) for name in current | changes}


def snapshot() -> EndpointSnapshot:
    primary = VariantSnapshot(
        variant_name="primary", model_name="v7-model", instance_type="ml.g5.2xlarge", instance_count=3, weight=1.0
    )
    return EndpointSnapshot(
        endpoint_name="manga-chat", status="InService", endpoint_config_name="v7-config", variants=(primary,)
    )


def serving() -> Pointer:
    """The pointer as the sample request's promotion leaves it: base v7 with manga_domain v3."""
    model = parse_request(request()).model
    return Pointer(
        **model.release().model_dump(),
        sagemaker_model="v7-model",
        endpoint_config_name="v7-config",
        previous_endpoint_config_name="v6-config",
        previous_version="v6",
    )


def plan(current: Pointer | None, **model_changes: Any) -> RolloutPlan:
    return build_plan(parse_request(request(**model_changes)), snapshot(), NOW, PARAMETER, current)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"sha256": "abc"}, "adapter 'jp_style': sha256 'abc' is not 64 lowercase hex digits"),
        ({"sha256": "A" * 64}, "adapter 'jp_style': sha256 'AAAA"),
        ({"sha256": "g" * 64}, "adapter 'jp_style': sha256 'gggg"),
    ],
)
def test_a_malformed_adapter_checksum_is_refused_naming_the_adapter(entry: dict[str, str], message: str) -> None:
    with pytest.raises(RolloutInputError, match=message):
        parse_request(request(adapters=adapters(jp_style=entry)))


def test_a_missing_adapter_checksum_is_refused_naming_the_adapter() -> None:
    entries = adapters()
    entries["shonen_voice"] = {k: v for k, v in entries["shonen_voice"].items() if k != "sha256"}
    with pytest.raises(RolloutInputError, match="adapter 'shonen_voice': sha256 is missing"):
        parse_request(request(adapters=entries))


def test_an_unversioned_adapter_path_is_refused_with_what_to_send_instead() -> None:
    with pytest.raises(RolloutInputError, match=r"adapter 'jp_style': expected \{version, path, sha256\}"):
        parse_request(request(adapters=adapters() | {"jp_style": "adapters/jp_style"}))


@pytest.mark.parametrize("sha256", [None, "abc", "0" * 63])
def test_a_missing_or_malformed_base_checksum_is_refused(sha256: str | None) -> None:
    model = {k: v for k, v in request()["model"].items() if k != "sha256"}
    if sha256 is not None:
        model["sha256"] = sha256
    with pytest.raises(RolloutInputError, match=r"model\.sha256: "):
        parse_request(request() | {"model": model})


def test_a_new_adapter_version_on_the_same_base_is_an_adapter_only_change() -> None:
    new = {"version": "v4", "path": "adapters/manga_domain/v4", "sha256": "d" * 64}
    p = plan(serving(), adapters=adapters(manga_domain=new))
    assert p.change.kind == "adapters-only" and p.change.adapters_changed == ("manga_domain",)
    assert p.change.summary == "adapter-only change: manga_domain v3 -> v4; base manga-llama v7 unchanged"
    # The pointer after promotion: the new adapter version, the same base, the previous adapters remembered.
    assert p.new_pointer.release().same_base(serving().release())
    assert p.new_pointer.adapters is not None and p.new_pointer.adapters["manga_domain"].version == "v4"
    assert p.new_pointer.previous_adapters == serving().adapters


def test_another_checksum_for_the_same_adapter_version_is_a_change_too() -> None:
    """A rebuilt artifact under an old version name is not the same adapter: the checksum tells them apart."""
    p = plan(serving(), adapters=adapters(jp_style={"sha256": "e" * 64}))
    assert (p.change.kind, p.change.adapters_changed) == ("adapters-only", ("jp_style",))


def test_another_base_checksum_is_a_base_change_even_under_the_same_version() -> None:
    p = plan(serving(), sha256="f" * 64)
    assert p.change.kind == "base" and p.change.adapters_changed == ()


def test_the_same_release_again_and_a_first_release_are_told_apart() -> None:
    assert plan(serving()).change.kind == "unchanged"
    assert plan(None).change.kind == "first"


def test_an_adapter_only_change_gets_its_own_registry_row_with_every_checksum() -> None:
    new = {"version": "v4", "path": "adapters/manga_domain/v4", "sha256": "d" * 64}
    before, after = plan(None).registry_item, plan(serving(), adapters=adapters(manga_domain=new)).registry_item
    assert before[REGISTRY_SK] != after[REGISTRY_SK]  # the v7 + manga_domain v3 row is never rewritten
    assert after["base_version"] == before["base_version"] == {"S": "v7"}
    assert after["sha256"] == before["sha256"] == {"S": request()["model"]["sha256"]}
    assert after["adapters"]["M"]["manga_domain"]["M"] == {
        "version": {"S": "v4"},
        "path": {"S": "adapters/manga_domain/v4"},
        "sha256": {"S": "d" * 64},
    }
    assert after["adapters"]["M"]["jp_style"] == before["adapters"]["M"]["jp_style"]


def test_the_pointer_round_trips_through_its_json_with_adapter_versions_and_checksums() -> None:
    pointer = plan(serving()).new_pointer
    again = Pointer.model_validate_json(pointer.to_json())
    assert again == pointer
    assert again.adapters == pointer.adapters
    assert (
        again.adapters is not None
        and again.adapters["shonen_voice"].sha256 == request()["model"]["adapters"]["shonen_voice"]["sha256"]
    )


def test_a_pointer_written_before_checksums_still_reads_with_them_unknown() -> None:
    old = '{"model": "manga-llama", "version": "v6", "sagemaker_model": "m", "endpoint_config_name": "v6-config"}'
    pointer = Pointer.model_validate_json(old)
    assert (pointer.sha256, pointer.adapters) == (None, None)
    assert plan(pointer).change.kind == "base"


def test_the_restored_pointer_carries_the_previous_adapter_versions_and_names_no_earlier_release() -> None:
    new = {"version": "v4", "path": "adapters/manga_domain/v4", "sha256": "d" * 64}
    promoted = plan(serving(), adapters=adapters(manga_domain=new)).new_pointer
    restored = promoted.restored()
    assert restored is not None
    assert restored.release() == serving().release()
    assert restored.endpoint_config_name == "v7-config"
    # A second rollback has nothing more to undo: the restored pointer names no previous config.
    assert restored.previous_endpoint_config_name is None and restored.restored() is None


def test_release_change_lists_added_and_removed_adapters() -> None:
    one = AdapterVersion(version="v1", path="adapters/a/v1", sha256="1" * 64)
    old = Release(model="m", version="v7", sha256="a" * 64, adapters={"a": one})
    new = old.model_copy(update={"adapters": {"b": one}})
    change = release_change(old, new)
    assert change.kind == "adapters-only" and change.adapters_changed == ("a", "b")
    assert "a v1 -> none" in change.summary and "b none -> v1" in change.summary


def test_an_operator_rollback_after_an_adapter_only_promotion_targets_the_previous_release() -> None:
    new = {"version": "v4", "path": "adapters/manga_domain/v4", "sha256": "d" * 64}
    promoted = plan(serving(), adapters=adapters(manga_domain=new)).new_pointer
    request = RollbackRequest(endpoint_name="manga-chat", rollback_id="undo-manga-domain-v4")
    target, pointer_json = resolve_target(request, promoted, promoted.endpoint_config_name)
    assert target == "v7-config" and pointer_json is not None
    assert Pointer.model_validate_json(pointer_json).release() == serving().release()
