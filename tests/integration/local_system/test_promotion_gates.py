"""Model promotion end to end: the pre-traffic gates on the local system, with users asking throughout.

The stack's dev environment runs the pre-traffic gates (fleet.yaml ``rollout_policy``), as the shipped fleet
does. Real here: the rollout's ASL and handlers, the artifact in the emulated S3, the canary's container and
CPU vLLM engine, the candidate gate's ``InvokeEndpoint`` calls with ``TargetVariant``, the trained good and bad
LoRA adapters (devtools/eval_adapters.py) and the shipped evaluation suite. Whether a user request reached the
candidate is read from the candidate gateway's own request count, against what the gate says it sent.

Each candidate starts its own CPU engine, and a promoted one another for the primary: the good candidate is
promoted once, with the shadow phase on, and two tests read that one rollout (every gate passed; the shadow
comparison on live requests), rather than a second good candidate for the shadow alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from devtools.emulator import MotoServer
from devtools.eval_adapters import training_in_background
from devtools.local_system import CANARY, ENDPOINT, PRIMARY, LocalSystem, local_system
from devtools.promotion_scenarios import (
    LOCAL_SHADOW,
    PromotionOutcome,
    candidate_artifact,
    promote,
    summary,
    users_on,
)
from devtools.restored_config import serving_config, serving_restored
from devtools.tiny_model import TinyModel

pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def gated(
    emulator: MotoServer, tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalSystem]:
    """One gated stack for the module: each rollout below leaves the endpoint on one primary variant.

    The eval adapters the candidates serve train in the background meanwhile when not current (unless a container
    session already started them): the deployment and the first test need none.
    """
    emulator.reset()
    workdir = tmp_path_factory.mktemp("gated")
    with (
        training_in_background(tiny_model, workdir / "eval-adapters.log"),
        local_system(workdir, tiny_model, pre_traffic_gates=True) as deployed,
    ):
        yield deployed


@pytest.fixture(scope="module")
def good_promoted(gated: LocalSystem) -> PromotionOutcome:
    """The good candidate's rollout, shadowed: every live request captured for 20 s, the thresholds wide (this is
    about the comparison's path and its place in the summary; tests/unit/promotion/test_shadow.py judges the
    thresholds). Runs after the refused candidates, so the primary it is compared with is still v1."""
    return promote(gated, "v2-good", candidate_artifact(gated, "v2-good", "good"), shadow=LOCAL_SHADOW)


def test_a_candidate_with_a_broken_tokenizer_is_refused_at_the_artifact_gate(gated: LocalSystem) -> None:
    before = serving_config(ENDPOINT)
    outcome = promote(gated, "v2-tokenizer", gated.artifact("v2-tokenizer", broken="tokenizer"))

    # What the operator sees: refused, naming the file; nothing was created, the lease never taken.
    assert outcome.execution["status"] == "FAILED" and outcome.execution["error"] == "ArtifactRefusedError"
    assert "tokenizer.json" in outcome.execution["cause"], outcome.execution["cause"]
    assert "AcquireLease" not in outcome.states and "CreateModel" not in outcome.states, outcome.states
    assert serving_config(ENDPOINT) == before
    # No user request reached it (there was no candidate to reach); users kept getting the primary's answers.
    assert outcome.candidate_requests == 0, summary(outcome)
    assert outcome.users and all(a.variant == PRIMARY and a.controlled for a in outcome.users), summary(outcome)


def test_a_candidate_whose_adapter_misses_the_suites_titles_is_rolled_back_before_any_user(gated: LocalSystem) -> None:
    before = serving_config(ENDPOINT)
    outcome = promote(gated, "v2-bad", candidate_artifact(gated, "v2-bad", "bad"))

    assert outcome.execution["status"] == "FAILED" and outcome.execution["error"] == "RolledBack", summary(outcome)
    cause = outcome.execution["cause"]
    # The cause names the gate, a failing prompt and what its answer lacked.
    assert cause.startswith("CandidateGateFailed: evaluation failed"), cause
    assert re.search(r"(en|ja)-0\d: missing ", cause), cause
    # It passed the artifact gate and the load test (it serves); the evaluation failed it.
    assert outcome.candidate_gate is not None and outcome.candidate_gate["load_test"]["passed"] is True
    assert "SetWeights" not in outcome.states, outcome.states
    # The candidate's gateway counted exactly the gate's requests: no user request reached it.
    assert outcome.gate_requests > 0
    assert outcome.user_requests_to_candidate == 0, summary(outcome)
    assert not users_on(outcome, CANARY) and all(a.controlled for a in outcome.users), summary(outcome)
    serving_restored(ENDPOINT, before)  # the config before, or the rollback's copy of it


def test_a_good_candidate_passes_every_gate_and_is_promoted(
    gated: LocalSystem, good_promoted: PromotionOutcome
) -> None:
    outcome = good_promoted

    assert outcome.execution["status"] == "SUCCEEDED", summary(outcome)
    gate = outcome.candidate_gate
    assert gate is not None and gate["passed"] is True, gate
    # Every set passes in both languages, and the candidate is no worse than the primary on the same prompts.
    rates = gate["evaluation"]["candidate_pass_rate"]
    assert sorted(rates) == ["knowledge/en", "knowledge/ja", "safety/en", "safety/ja"], rates
    assert (
        min(rates["knowledge/en"], rates["knowledge/ja"]) >= 0.9 and min(rates["safety/en"], rates["safety/ja"]) >= 0.99
    )
    assert "within" in gate["evaluation"]["reason"], gate["evaluation"]["reason"]
    states = outcome.states
    assert states.index("CheckArtifact") < states.index("CreateModel") < states.index("TestCandidate")
    assert states.index("TestCandidate") < states.index("SetWeights") < states.index("Promote")
    assert serving_config(ENDPOINT) == f"{ENDPOINT}-v2-good-final"
    assert gated.invoke("Where is my order?").version == "v2-good"


def test_a_shadowed_candidate_is_compared_on_live_requests_before_any_user_and_the_summary_says_so(
    good_promoted: PromotionOutcome,
) -> None:
    outcome = good_promoted

    assert outcome.execution["status"] == "SUCCEEDED", summary(outcome)
    comparison = outcome.output["shadow_comparison"]
    assert comparison["passed"] is True and comparison["summary"].startswith("shadow passed: "), comparison
    result = comparison["result"]
    # The live requests users sent while the candidate sat at weight 0, replayed to both variants.
    assert result["requests"] >= 5 and result["candidate_errors"] == 0, result
    assert result["similarity"] is not None and result["candidate_p95_ms"] and result["primary_p95_ms"]
    states = outcome.states
    assert states.index("TestCandidate") < states.index("ShadowBake") < states.index("CompareShadow")
    assert states.index("CompareShadow") < states.index("SetWeights")
