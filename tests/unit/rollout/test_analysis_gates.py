"""The canary's absolute SLO gates, and no pass without data: fixed numbers through the pure verdict."""

from __future__ import annotations

from typing import Any

import pytest

from fleetops.rollout.analysis import Analysis, VariantStats, analyse
from fleetops.rollout.checks import load_canary_checks
from fleetops.rollout.guardrails import threshold_problems
from fleetops.rollout.thresholds import Thresholds
from tests.unit.rollout.test_analysis import KEYS

SHIPPED = load_canary_checks()
T = SHIPPED.with_overrides(Thresholds(min_requests=100))
#: What the primary reports when it served nothing in the window (the 100 % step): counts are 0, no percentiles.
IDLE = {"requests": 0, "errors": 0, "p95_latency_ms": None, "p95_ttft_ms": None}


def stats(name: str, **values: Any) -> VariantStats:
    base: dict[str, Any] = {"requests": 1000, "errors": 1, "p95_latency_ms": 1000.0, "p95_ttft_ms": 300.0}
    return VariantStats(variant_name=name, values={KEYS[k]: v for k, v in (base | values).items()})


def line(result: Analysis, name: str) -> dict[str, Any]:
    return next(r for r in result.checks if r.name == name).model_dump()


@pytest.mark.parametrize(
    ("canary", "verdict", "reason"),
    [
        ({"p95_latency_ms": 5000.0, "p95_ttft_ms": 5000.0}, "fail", "absolute SLO: p95 TTFT 5000 ms above 500 ms"),
        ({"p95_latency_ms": 12000.0}, "fail", "absolute SLO: p95 latency 12000 ms above 10000 ms"),
        ({"p95_latency_ms": 5000.0, "p95_ttft_ms": None}, "inconclusive", "no canary data: no p95 TTFT on the canary"),
    ],
)
@pytest.mark.parametrize("primary", [IDLE, {"p95_latency_ms": None, "p95_ttft_ms": None}], ids=["idle", "no-latency"])
def test_a_slow_canary_never_passes_when_the_primary_has_no_latency_data(
    canary: dict[str, Any], verdict: str, reason: str, primary: dict[str, Any]
) -> None:
    result = analyse(stats("canary", **canary), stats("primary", **primary), T)
    assert result.verdict == verdict, result.summary
    assert any(r.startswith(reason) for r in result.reasons), result.reasons
    assert "| baseline " in result.summary and "p95 n/a, TTFT p95 n/a" in result.summary


def test_a_relative_check_without_a_baseline_value_is_judged_by_the_absolute_gate_on_its_series() -> None:
    # The relative p95 latency line takes the absolute gate's limit and says so; its failure is listed once.
    result = analyse(stats("canary", p95_latency_ms=12000.0), stats("primary", **IDLE), T)
    assert {k: line(result, "p95-latency")[k] for k in ("gate", "outcome", "baseline", "limit", "judged_by")} == {
        "gate": "absolute",
        "outcome": "fail",
        "baseline": None,
        "limit": 10000.0,
        "judged_by": "latency-slo",
    }
    assert result.reasons == ("absolute SLO: p95 latency 12000 ms above 10000 ms",)
    assert result.summary.startswith("FAIL (absolute SLO): canary 1000 req")


def test_a_healthy_canary_at_100_percent_passes_on_the_absolute_gates_alone() -> None:
    # At the last step the primary serves nothing: no relative comparison is possible, the SLOs decide.
    result = analyse(stats("canary"), stats("primary", **IDLE), T)
    assert result.verdict == "pass" and result.reasons == (), result.summary
    ttft = line(result, "p95-ttft")
    assert (ttft["outcome"], ttft["gate"], ttft["limit"], ttft["judged_by"]) == ("pass", "absolute", 500.0, "ttft-slo")


@pytest.mark.parametrize(
    ("both", "reason"),
    [
        ({"p95_ttft_ms": 700.0}, "absolute SLO: p95 TTFT 700 ms above 500 ms"),
        ({"errors": 20}, "absolute SLO: error rate 2.00% above 0.50%"),
        ({"p95_latency_ms": 11000.0}, "absolute SLO: p95 latency 11000 ms above 10000 ms"),
    ],
)
def test_a_canary_over_an_absolute_limit_fails_even_when_the_primary_is_equally_bad(
    both: dict[str, Any], reason: str
) -> None:
    result = analyse(stats("canary", **both), stats("primary", **both), T)
    assert result.verdict == "fail"
    # Relative to the primary nothing changed: the absolute gate alone fails it, and the summary says which.
    assert result.reasons == (reason,)
    assert result.summary.startswith("FAIL (absolute SLO): ") and result.summary.endswith(f"| {reason}")


def test_a_canary_without_latency_values_is_inconclusive_and_the_reason_says_what_was_missing() -> None:
    result = analyse(stats("canary", p95_latency_ms=None, p95_ttft_ms=None), stats("primary"), T)
    assert result.verdict == "inconclusive"
    assert result.reasons == (
        "no canary data: no p95 latency on the canary in the bake window",
        "no canary data: no p95 TTFT on the canary in the bake window",
    )
    assert result.summary.startswith("INCONCLUSIVE (no canary data): canary 1000 req")
    assert {line(result, n)["outcome"] for n in ("p95-latency", "latency-slo", "p95-ttft", "ttft-slo")} == {
        "inconclusive"
    }


def test_missing_data_does_not_hide_a_failure() -> None:
    # An error rate over the SLO fails the canary (roll back now) even while its TTFT is missing.
    result = analyse(stats("canary", errors=20, p95_ttft_ms=None), stats("primary"), T)
    assert result.verdict == "fail" and result.summary.startswith("FAIL (absolute SLO")
    assert "no canary data: no p95 TTFT on the canary in the bake window" in result.reasons


@pytest.mark.parametrize(
    ("thresholds", "check"),
    [
        (Thresholds(max_ttft_p95_ms=800), "ttft-slo"),
        (Thresholds(max_latency_p95_ms=20000), "latency-slo"),
        (Thresholds(max_error_rate=0.01), "error-rate"),
    ],
)
def test_a_request_cannot_loosen_an_absolute_gate(thresholds: Thresholds, check: str) -> None:
    [problem] = threshold_problems(thresholds, SHIPPED)
    assert f"is looser than check {check!r} (maximum" in problem, problem


def test_a_request_may_tighten_an_absolute_gate_and_the_verdict_applies_it() -> None:
    tight = Thresholds(min_requests=1000, max_ttft_p95_ms=400, max_error_rate=0.001)
    assert threshold_problems(tight, SHIPPED) == []
    canary = stats("canary", p95_ttft_ms=450.0)
    assert analyse(canary, stats("primary", p95_ttft_ms=450.0), T).verdict == "pass"
    tightened = analyse(canary, stats("primary", p95_ttft_ms=450.0), SHIPPED.with_overrides(tight))
    # 0.10 % errors is at the tightened limit, not above it.
    assert tightened.reasons == ("absolute SLO: p95 TTFT 450 ms above 400 ms",)


# --- the SLOs judged on counts: how many requests are over the limit, against the share the SLO allows ---


def with_ttft_counts(name: str, p95: float, over: int, samples: int = 540) -> VariantStats:
    """A variant whose p95 TTFT reads ``p95`` over ``samples`` values, ``over`` of them above the 500 ms SLO."""
    share = 100 * (samples - over) / samples
    counts = {"TimeToFirstTokenMs:SampleCount": samples, "TimeToFirstTokenMs:PR(:500)": share}
    found = stats(name, p95_ttft_ms=p95, requests=samples)
    return found.model_copy(update={"values": found.values | counts})


def test_a_p95_over_its_slo_within_chance_bakes_again_and_far_over_fails() -> None:
    # The 5 % step's 540 requests: 30 over 500 ms (5.6 %, the SLO allows 5 %) is P 0.30 for a canary right at
    # the SLO: the point value alone failed it, now the step bakes again on the same window.
    near = analyse(with_ttft_counts("canary", 510.0, over=30), with_ttft_counts("primary", 490.0, over=25), T)
    line_near = line(near, "ttft-slo")
    assert near.verdict == "inconclusive" and line_near["outcome"] == "inconclusive"
    assert line_near["p_value"] == pytest.approx(0.303, abs=0.001)
    assert near.reasons == ("absolute SLO: p95 TTFT 510 ms above 500 ms, not yet beyond chance (p 0.3): bake longer",)
    # 60 of them (11 %) is beyond chance: the SLO fails the canary whatever the primary did.
    far = analyse(with_ttft_counts("canary", 560.0, over=60), with_ttft_counts("primary", 560.0, over=60), T)
    assert far.verdict == "fail" and far.reasons == ("absolute SLO: p95 TTFT 560 ms above 500 ms",)
    assert (line(far, "ttft-slo")["p_value"] or 1) < 0.0002


def test_an_error_rate_over_its_slo_as_likely_at_the_slo_as_above_passes_with_its_p_value() -> None:
    # 3 errors in 540 requests (0.56 %) happen to one canary in ten at the primary's 0.2 %, and to half of those
    # right at the 0.5 % SLO (P 0.51): no evidence it is over, so the step passes instead of baking again.
    result = analyse(stats("canary", requests=540, errors=3), stats("primary", requests=10000, errors=20), T)
    slo = line(result, "error-rate")
    assert result.verdict == "pass" and slo["outcome"] == "pass" and slo["reason"] is None
    assert slo["canary"] == pytest.approx(3 / 540) and slo["p_value"] == pytest.approx(0.507, abs=0.001)
    # One more error (0.74 %, P 0.29 at the SLO) holds it.
    held = analyse(stats("canary", requests=540, errors=4), stats("primary", requests=10000, errors=20), T)
    assert held.verdict == "inconclusive" and line(held, "error-rate")["outcome"] == "inconclusive"


def test_an_excess_over_the_primary_at_p_0_0004_passes_one_test_spends_0_0002() -> None:
    # 12 errors in 4000 canary requests against 5 in 10,000: Fisher's p 0.0004. A rollout makes some 30 tests,
    # so 0.0005 each rolled back more than 1 % of good releases; 0.0002 each keeps the whole rollout under it.
    result = analyse(stats("canary", requests=4000, errors=12), stats("primary", requests=10000, errors=5), T)
    increase = line(result, "error-rate-increase")
    assert 0.0002 < (increase["p_value"] or 0) < 0.0005
    assert result.verdict == "pass" and increase["outcome"] == "pass"
