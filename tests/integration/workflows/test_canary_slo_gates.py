"""The canary's absolute SLO gates in the rollout executed from ``statemachines/canary_rollout.asl.json``.

The analysis reads the per-variant percentiles from the emulated CloudWatch, fed by the workflow tests' traffic
helper as the gateway's EMF would (see ``conftest.py``).
"""

from __future__ import annotations

import pytest

from devtools import rollout_workflow as wf
from tests.integration.workflows.conftest import HEALTHY, rollout_request
from tests.integration.workflows.test_canary_rollout import assert_rolled_back


@pytest.mark.parametrize(
    ("slow", "reason"),
    [
        # 20 TTFTs spread from 0.5x to 1.45x: a p95 well above 500 ms on both variants.
        ({"ttft_ms": 600}, "absolute SLO: p95 TTFT"),
        # 5 % errors: beyond chance in one interval's 300 requests (the judge tests the counts, not the point).
        ({"errors": 15}, "absolute SLO: error rate 5.00% above 0.50%"),
    ],
)
def test_a_canary_over_an_slo_rolls_back_even_when_the_primary_is_equally_bad(
    rollout: wf.RolloutWorkflow, slow: dict[str, int], reason: str
) -> None:
    # Relative to the primary nothing is worse, so only the absolute gate can stop this release.
    request = rollout_request()
    with wf.traffic(canary=HEALTHY | slow, primary=HEALTHY | slow):
        execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
        result = wf.wait(execution, timeout_s=60)

    assert_rolled_back(rollout, result, "CanaryAnalysisFailed")
    cause = result["cause"]
    assert "FAIL (absolute SLO): canary " in cause, cause
    assert reason in cause and "relative to baseline" not in cause, cause
    # The first step's analysis failed it: no second step was set.
    assert wf.state_history(execution).count("SetWeights") == 1


def test_a_canary_over_the_error_slo_but_not_beyond_chance_bakes_again_and_is_never_promoted(
    rollout: wf.RolloutWorkflow,
) -> None:
    # 0.67 % errors on both variants: over the 0.5 % SLO, yet on a few thousand requests within chance (it would
    # take some 20,000). Each analysis is inconclusive, each extension bakes on the same window, and when the
    # extensions run out the release rolls back: a point value over the SLO is never a pass.
    request = rollout_request()
    slow = HEALTHY | {"errors": 2}
    with wf.traffic(canary=slow, primary=slow):
        execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
        result = wf.wait(execution, timeout_s=60)

    assert_rolled_back(rollout, result, "CanaryAnalysisInconclusive")
    cause = result["cause"]
    assert "INCONCLUSIVE (absolute SLO): canary " in cause, cause
    assert "absolute SLO: error rate 0.67% above 0.50%, not yet beyond chance (p " in cause, cause
    history = wf.state_history(execution)
    assert history.count("SetWeights") == 1 and history.count("Analyse") == 1 + request["max_extensions"]
