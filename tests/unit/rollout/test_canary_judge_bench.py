"""The canary-judge benchmark (``bench/canary_judge.py``) on a few seeds: it judges with the project's own
analysis, rolls an obviously broken canary back at its first step and writes every key it documents.

Its CloudWatch is the bench's replay of per-request numbers (:class:`bench.canary_judge.ReplayedCloudWatch`, a
test double for GetMetricData); the window reading (``CanaryMetrics.window``) and the verdict (``analyse``) are
the real ones.
"""

from __future__ import annotations

import math

import pytest

from bench import canary_judge as bench
from bench._canary_power import detection_chance
from fleetops.rollout import analysis
from fleetops.rollout.checks import load_canary_checks
from fleetops.rollout.significance import ALPHA, excess_p_value
from fleetops.rollout.thresholds import Thresholds

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
    for step in (5, 25, 50, 75, 100):
        assert 0 <= results[f"rolled_back_at_step_rate__errors_plus50pct__w{step}"] <= 1
    # What the counts allow for errors 0.2 -> 0.3 %: one 15-minute analysis at 5 % is nearly blind to it; it takes
    # hundreds of minutes at that weight, and with the check's 0.1-point margin (the whole regression) never half.
    assert (
        0
        < results["errors_plus50pct_detect_chance_at_5pct_bake"]
        < results["errors_plus50pct_detect_chance_at_5pct_bake_alpha_0.01"]
        < results["errors_plus50pct_detect_chance_pooled_rollout"]
        < 0.5
    )
    assert 1.5 < results["errors_factor_detected_half_at_5pct_bake"] < 20
    assert (
        15
        < results["errors_plus50pct_minutes_for_half_at_5pct_weight_alpha_0.01"]
        < results["errors_plus50pct_minutes_for_half_at_5pct_weight"]
    )
    assert results["errors_plus50pct_minutes_for_half_at_5pct_weight_with_margin"] == -1


def _poisson(mean: float, k: int) -> float:
    return math.exp(k * math.log(mean) - mean - math.lgamma(k + 1))


@pytest.mark.parametrize(("factor", "increase"), [(1.0, 0.0), (4.0, 0.0), (4.0, 0.01)])
def test_the_detection_chance_is_the_shipped_tests_rejections_summed_over_both_variants_error_counts(
    factor: float, increase: float
) -> None:
    # Brute force on a window small enough to enumerate: every pair of error counts (Poisson, independent), each
    # judged by the analysis's own Fisher test at its alpha and the point limit.
    n_c, n_b, rate = 200, 800, 0.01
    expected = sum(
        _poisson(n_c * rate * factor, k) * _poisson(n_b * rate, j)
        for k in range(1, 60)
        for j in range(0, 60)
        if k / n_c > j / n_b + increase and excess_p_value(k, n_c, j, n_b) < ALPHA
    )
    assert detection_chance(n_c, n_b, rate, factor, increase) == pytest.approx(expected, rel=1e-6, abs=1e-12)
