"""The rollout's two pre-traffic gates, judged on fixed inputs: the artifact gate's comparison with the request,
and the candidate gate on scripted replies (a test double for ``InvokeEndpoint``; the real calls run on the local
system in tests/integration/local_system/test_promotion_gates.py)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from devtools.tiny_model import ensure_tiny_model
from fleetops.promotion.artifact_files import check_folder
from fleetops.promotion.artifact_gate import ArtifactRefusedError, gate_artifact, release_problems
from fleetops.promotion.candidate_gate import gate_candidate
from fleetops.promotion.reply import Reply
from fleetops.rollout.versions import AdapterVersion, Release
from tests.unit.promotion.small_suite import GOOD, make_suite

REPO = Path(__file__).resolve().parents[3]
URL = "s3://manga-llm-artifacts/models/manga-llama/v2/model.tar.gz"


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generated model with two adapters at versioned folders, as the gate measures it."""
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    root = tmp_path_factory.mktemp("artifact") / "model"
    shutil.copytree(tiny.model_dir, root)
    for name in ("jp_style", "manga_domain"):
        shutil.copytree(tiny.adapters[name], root / "adapters" / name / "v4")
    return check_folder(root)


def release(checked: Any, **changes: Any) -> Release:
    adapters = {
        name: AdapterVersion(
            version="v4", path=f"adapters/{name}/v4", sha256=checked.adapters[f"adapters/{name}/v4"].digest
        )
        for name in ("jp_style", "manga_domain")
    }
    return Release(model="manga-llama", version="v2", sha256=checked.base.digest, adapters=adapters).model_copy(
        update=changes
    )


def test_an_artifact_matching_the_requests_checksums_passes_and_says_what_it_checked(checked: Any) -> None:
    result = gate_artifact(checked, release(checked), URL)

    assert result.base_sha256 == checked.base.digest
    assert result.adapters == {n: checked.adapters[f"adapters/{n}/v4"].digest for n in ("jp_style", "manga_domain")}
    assert result.files == len(checked.base.files) + sum(len(a.files) for a in checked.adapters.values())


def test_another_base_checksum_is_refused_as_not_the_artifact_requested(checked: Any) -> None:
    with pytest.raises(ArtifactRefusedError) as refused:
        gate_artifact(checked, release(checked, sha256="f" * 64), URL)

    assert str(refused.value).startswith(f"{URL} refused by the artifact gate: base model: the artifact's sha256 is")
    assert "ffffffffffffffff...: not the artifact requested" in str(refused.value)


def test_an_adapter_at_another_checksum_or_missing_from_the_artifact_is_named(checked: Any) -> None:
    entries = release(checked).adapters or {}
    wrong = entries["jp_style"].model_copy(update={"sha256": "e" * 64})
    ghost = AdapterVersion(version="v1", path="adapters/ghost/v1/", sha256="d" * 64)

    problems = release_problems(checked, release(checked, adapters={**entries, "jp_style": wrong, "ghost": ghost}))

    assert problems == [
        "adapter ghost: folder adapters/ghost/v1 is not in the artifact (adapter folders: adapters/jp_style/v4, "
        "adapters/manga_domain/v4)",
        f"adapter jp_style v4: the artifact's adapters/jp_style/v4 has sha256 {entries['jp_style'].sha256}, the "
        "request names eeeeeeeeeeeeeeee...: not the adapter requested",
    ]


def scripted(answers: dict[str, dict[str, str]], status: int = 200, seconds: float = 0.05) -> Any:
    """A test double for ``InvokeEndpoint`` with ``TargetVariant``: each variant answers its script, counted."""
    sent: dict[str, int] = {}
    lock = threading.Lock()

    def invoke(variant: str, body: dict[str, Any]) -> Reply:
        with lock:
            sent[variant] = sent.get(variant, 0) + 1
        question = body["messages"][-1]["content"]
        text = next((a for q, a in answers[variant].items() if q == question), "I can help with orders.")
        return Reply(status, text if status == 200 else None, seconds, "" if status == 200 else "engine died")

    invoke.sent = sent  # type: ignore[attr-defined]
    return invoke


def by_question(tmp_path: Path, answers: dict[str, str]) -> dict[str, str]:
    suite = make_suite(tmp_path)
    return {p.chat_messages()[-1]["content"]: answers[p.id] for p in suite.prompts}


def test_a_candidate_that_serves_and_answers_the_suite_passes_beside_the_primary(tmp_path: Path) -> None:
    good = by_question(tmp_path, GOOD)
    invoke = scripted({"canary": good, "primary": good})

    result = gate_candidate(invoke, make_suite(tmp_path), candidate="canary", primary="primary", latency_limit_ms=500)

    assert result.passed and result.load_test.passed, result.summary
    assert result.summary.startswith("passed: candidate: knowledge/en passed")
    assert result.evaluation is not None and result.evaluation.primary_pass_rate == {
        "knowledge/en": 1.0,
        "knowledge/ja": 1.0,
    }
    # Ten load-test requests plus every prompt went to the candidate; every prompt once to the primary.
    assert invoke.sent == {"canary": 10 + 4, "primary": 4}
    assert (result.requests_to_candidate, result.requests_to_primary) == (14, 4)


def test_a_candidate_missing_a_required_title_fails_naming_the_prompt(tmp_path: Path) -> None:
    bad = by_question(tmp_path, GOOD | {"ja-03": "おすすめの漫画はたくさんあります。"})
    invoke = scripted({"canary": bad, "primary": by_question(tmp_path, GOOD)})

    result = gate_candidate(invoke, make_suite(tmp_path), candidate="canary", primary="primary", latency_limit_ms=500)

    # ja still meets its pass rate (0.5 here) but fell below the primary on the same prompts.
    assert not result.passed
    assert result.summary.startswith("evaluation failed: candidate: knowledge/en passed")
    assert "knowledge/ja below the primary: 50% against the primary's 100%" in result.summary
    assert "regressed ja-03" in result.summary
    assert result.evaluation is not None and result.evaluation.failed_prompts == ["ja-03: missing 鬼滅の刃"]


def test_a_candidate_that_cannot_serve_fails_the_load_test_and_is_not_evaluated(tmp_path: Path) -> None:
    invoke = scripted({"canary": {}}, status=500)

    result = gate_candidate(invoke, make_suite(tmp_path), candidate="canary", primary="primary", latency_limit_ms=500)

    assert not result.passed and result.evaluation is None
    assert result.summary == "load test failed on canary: 10 of 10 failed (first: status 500 engine died)"
    assert invoke.sent == {"canary": 10}


def test_a_candidate_slower_than_the_latency_slo_fails_the_load_test(tmp_path: Path) -> None:
    good = by_question(tmp_path, GOOD)

    result = gate_candidate(
        scripted({"canary": good}, seconds=0.7),
        make_suite(tmp_path),
        candidate="canary",
        primary=None,
        latency_limit_ms=500,
    )

    assert not result.passed
    assert result.summary == "load test failed on canary: slowest answer 700 ms above the latency SLO 500 ms"
