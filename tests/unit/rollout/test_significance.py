"""The canary judge's tests on counts, checked on cases small enough to compute by hand, and how the analysis
uses them (a point value over its limit fails only beyond chance)."""

from __future__ import annotations

import math

import pytest

from fleetops.rollout.analysis import VariantStats, analyse, tail_series
from fleetops.rollout.checks import load_canary_checks
from fleetops.rollout.significance import BOUNDS, bins, excess_p_value, rate_above_p_value, slower_p_value
from fleetops.rollout.thresholds import Thresholds

T = load_canary_checks().with_overrides(Thresholds(min_requests=100))


@pytest.mark.parametrize(
    ("events", "trials", "rate", "expected"),
    [
        (2, 3, 0.5, 4 / 8),  # P(X >= 2), X ~ Bin(3, 1/2): (3 + 1) / 8
        (1, 2, 0.1, 0.19),  # 1 - 0.9^2
        (3, 3, 0.1, 0.001),  # 0.1^3
        (3, 10, 0.5, 1 - (1 + 10 + 45) / 1024),  # below the mean: summed as the complement
        (8, 10, 0.5, (45 + 10 + 1) / 1024),  # above it: the tail itself
        (0, 10, 0.3, 1.0),  # no events: nothing to explain
        (11, 10, 0.3, 0.0),  # more events than trials cannot happen
        (1, 10, 0.0, 0.0),  # an event where none can happen
        (5, 10, 1.0, 1.0),
    ],
)
def test_the_binomial_tail_on_hand_computed_cases(events: int, trials: int, rate: float, expected: float) -> None:
    assert rate_above_p_value(events, trials, rate) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        # Canary 3 of 4 with an event, baseline 0 of 4: of C(8, 4) = 70 ways to seat 4 canary trials among 8, the
        # canary holds all 3 events in C(3, 3) C(5, 1) = 5.
        ((3, 4, 0, 4), 5 / 70),
        # Canary 2 of 4, baseline 1 of 4: (C(3, 2) C(5, 2) + 5) / 70 = (30 + 5) / 70.
        ((2, 4, 1, 4), 35 / 70),
        # Canary 3 of 5, baseline 0 of 5: C(3, 3) C(7, 2) / C(10, 5) = 21 / 252.
        ((3, 5, 0, 5), 21 / 252),
        ((0, 100, 5, 100), 1.0),  # a canary without events is never worse
    ],
)
def test_fishers_exact_test_on_hand_computed_two_by_two_tables(table: tuple[int, ...], expected: float) -> None:
    assert excess_p_value(*table) == pytest.approx(expected, abs=1e-12)


def test_the_rank_sum_on_two_bins_with_ties() -> None:
    # Baseline 2 requests in the fast bin (mid-rank 1.5), canary 2 in the slow bin (mid-rank 3.5): W = 7 against
    # 2 x 5 / 2 = 5; tie-corrected variance 2 x 2 / 12 x (5 - 12 / 12) = 4/3, so z = 2 / sqrt(4/3) = sqrt(3).
    expected = 0.5 * math.erfc(math.sqrt(3) / math.sqrt(2))  # 1 - Phi(sqrt 3) = 0.04163
    assert slower_p_value([0, 2], [2, 0]) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.041632, abs=1e-6)
    # The other way round the canary is the faster one: one-sided, the complement.
    assert slower_p_value([2, 0], [0, 2]) == pytest.approx(1 - expected, abs=1e-12)


def test_the_rank_sum_without_ties() -> None:
    # One request per bin: baseline ranks 1 and 3, canary 2 and 4, W = 6 against 5, variance 2 x 2 x 5 / 12.
    z = 1 / math.sqrt(5 / 3)
    assert slower_p_value([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(0.5 * math.erfc(z / math.sqrt(2)), abs=1e-12)
    assert slower_p_value([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(0.21928, abs=1e-5)


def test_the_rank_sum_without_requests_or_spread_is_no_evidence() -> None:
    assert slower_p_value([0, 0], [3, 1]) == 1.0  # no canary requests
    assert slower_p_value([4, 0], [3, 0]) == 0.5  # every request in one bin: no order at all


def test_bins_from_counts_at_or_below_bounds() -> None:
    assert bins([2, 5, 5], 9) == [2, 3, 0, 4]
    # Rounded shares may step back: a bin never has fewer than no requests.
    assert bins([3, 2], 4) == [3, 0, 2]


# --- how the analysis uses them ---

TTFT = "TimeToFirstTokenMs"


def variant(
    name: str, p95: float, shares: list[float] | None = None, count: float = 0, errors: int = 2
) -> VariantStats:
    """A variant at the shipped checks' series, with its TTFT share (in %) at or below each of the baseline's
    (300 ms) multiples in :data:`BOUNDS`."""
    values: dict[str, float | None] = {
        "Requests:Sum": 1000,
        "RequestErrors:Sum": errors,
        "RequestLatencyMs:p95": 1000.0,
        f"{TTFT}:p95": p95,
    }
    if shares is not None:
        values |= {f"{TTFT}:SampleCount": count}
        values |= {f"{TTFT}:PR(:{300 * b:.6g})": share for b, share in zip(BOUNDS, shares, strict=True)}
    return VariantStats(variant_name=name, values=values)


BASELINE_SHARES = [5.0, 15.0, 30.0, 45.0, 60.0, 72.0, 85.0, 95.0, 98.0, 99.5]
SLOWER_SHARES = [2.0, 8.0, 18.0, 30.0, 44.0, 56.0, 70.0, 82.0, 92.0, 97.0]


def test_a_canary_percentile_over_the_limit_on_counts_like_the_baselines_passes_with_its_p_value() -> None:
    # The canary's p95 reads 33 % above the baseline's, but its 400 requests fall in the bins as the baseline's do.
    canary = variant("canary", 400.0, BASELINE_SHARES, count=400)
    result = analyse(canary, variant("primary", 300.0, BASELINE_SHARES, count=8000), T)
    line = next(c for c in result.checks if c.name == "p95-ttft")
    assert result.verdict == "pass" and line.outcome == "pass"
    assert line.p_value is not None and line.p_value > 0.5


def test_a_canary_percentile_over_the_limit_on_slower_counts_fails() -> None:
    canary = variant("canary", 400.0, SLOWER_SHARES, count=400)
    result = analyse(canary, variant("primary", 300.0, BASELINE_SHARES, count=8000), T)
    line = next(c for c in result.checks if c.name == "p95-ttft")
    assert result.verdict == "fail" and line.p_value is not None and line.p_value < 0.0005
    assert result.reasons == ("relative to baseline: p95 TTFT 400 ms is 33% above baseline 300 ms (max 5%)",)


def test_the_tail_counts_read_are_those_the_analysis_asks_for() -> None:
    asked = {s.key for s in tail_series(T, variant("primary", 300.0)) if s.metric == TTFT}
    relative = set(variant("canary", 400.0, BASELINE_SHARES, count=1).values) - set(variant("c", 400.0).values)
    assert asked == relative | {f"{TTFT}:PR(:500)"}  # and at the TTFT SLO's own limit


def test_without_the_tail_counts_the_point_values_judge_alone() -> None:
    result = analyse(variant("canary", 400.0), variant("primary", 300.0), T)
    line = next(c for c in result.checks if c.name == "p95-ttft")
    assert result.verdict == "fail" and line.p_value is None


def test_an_error_excess_over_the_baseline_within_chance_passes_and_a_large_one_fails() -> None:
    # 4 vs 2 errors in 1000 requests each: 0.2 points more (limit 0.1), Fisher's p 0.34; 20 vs 2: p ~ 1e-5.
    small = analyse(variant("canary", 300.0, errors=4), variant("primary", 300.0), T)
    line = next(c for c in small.checks if c.name == "error-rate-increase")
    assert small.verdict == "pass" and line.p_value == pytest.approx(excess_p_value(4, 1000, 2, 1000))
    assert 0.2 < (line.p_value or 0) < 0.5
    large = analyse(variant("canary", 300.0, errors=20), variant("primary", 300.0), T)
    assert "relative to baseline: error rate 2.00% vs baseline 0.20% (max increase 0.10%)" in large.reasons


def test_a_request_that_tightens_the_relative_limit_fails_a_significant_regression_the_declared_one_allows() -> None:
    # 4 % above the baseline's p95, on clearly slower counts: within the declared 5 %, over a request's 2 %.
    canary, primary = (
        variant("canary", 312.0, SLOWER_SHARES, count=400),
        variant("primary", 300.0, BASELINE_SHARES, 8000),
    )
    assert analyse(canary, primary, T).verdict == "pass"
    tight = analyse(canary, primary, T.with_overrides(Thresholds(max_latency_regression=0.02)))
    assert tight.reasons == ("relative to baseline: p95 TTFT 312 ms is 4% above baseline 300 ms (max 2%)",)
