"""The canary-judge benchmark (``bench/canary_judge.py``) on a few seeds: it judges with the project's own
analysis, rolls an obviously broken canary back at its first step and writes every key it documents.

Its CloudWatch is the bench's replay of per-request numbers (:class:`bench.canary_judge.ReplayedCloudWatch`, a
test double for GetMetricData); the window reading (``CanaryMetrics.window``) and the verdict (``analyse``) are
the real ones.
"""

from __future__ import annotations

import pytest

from bench import canary_judge as bench
from fleetops.rollout import analysis
from fleetops.rollout.checks import Thresholds, load_canary_checks

CHECKS = load_canary_checks()
RPS = bench.baseline_rps()


def test_it_judges_with_the_shipped_analysis_so_tighter_checks_change_its_verdicts() -> None:
    assert vars(bench)["analyse"] is analysis.analyse
    assert bench.rollout(1, RPS, CHECKS, (1.0, 1.0)) == bench.Rollout(False, 5 * 15, 100, ())
    # The same replay under a TTFT SLO of 100 ms, which the shape's p95 (about 400 ms) is far above.
    tight = CHECKS.with_overrides(Thresholds(max_ttft_p95_ms=100))
    assert bench.rollout(1, RPS, tight, (1.0, 1.0)) == bench.Rollout(True, 15, 5, ("ttft-slo",))


@pytest.mark.parametrize(
    ("factors", "check"),
    [((1.0, 50.0), "error-rate"), ((2.0, 1.0), "p95-ttft"), ((1.0, 5.0, 5.0), "error-rate")],
    ids=["errors-10pct", "ttft-x2", "both-variants-at-1pct"],
)
def test_an_obviously_broken_canary_is_rolled_back_at_the_five_percent_step(
    factors: tuple[float, ...], check: str
) -> None:
    for seed in range(3):
        result = bench.rollout(seed, RPS, CHECKS, factors)
        assert (result.rolled_back, result.weight) == (True, 5), (seed, result)
        assert check in result.failed_checks or f"inconclusive-{check}" in result.failed_checks, (seed, result)


def test_a_short_run_writes_every_documented_key() -> None:
    results = bench.run(aa=2, ab=2, table_seeds=1)

    assert results["aa_rollouts"] == 2 and results["ab_rollouts"] == 2 and results["table_seeds"] == 1
    assert results["bake_minutes"] == 15 and results["max_extensions"] == 2 and results["baseline_rps"] == RPS
    assert 0 <= results["aa_false_rollback_rate"] <= 1
    for name in bench.REGRESSIONS:
        assert f"minutes_to_detect_{name}_at_5pct_weight" in results and f"detected_rate__{name}" in results
    for name in bench.OVER_SLO:
        by_step = [results[f"rolled_back_at_step_rate__{name}__w{step}"] for step in (5, 25, 50, 75, 100)]
        assert 0 <= sum(by_step) <= 1 and 0 <= results[f"pct_reaching_100__{name}"] <= 100
    for weight in bench.WEIGHTS:
        for size in bench.SIZES:
            failed, passed = (results[f"{v}_rate_at_bake__{size}__w{weight}"] for v in ("fail", "pass"))
            assert 0 <= failed <= 1 and 0 <= passed <= 1 - failed
            assert results[f"minutes_to_detect__{size}__w{weight}"] in (-1.0, *bench.LOOKS)
    assert results["ttft_p50_ms"] < results["ttft_p95_ms"] < results["ttft_p99_ms"]
