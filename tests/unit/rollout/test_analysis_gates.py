"""The canary's absolute SLO gates, and no pass without data: fixed numbers through the pure verdict."""

from __future__ import annotations

from typing import Any

import pytest

from fleetops.rollout.analysis import Analysis, VariantStats, analyse
from fleetops.rollout.checks import Thresholds, load_canary_checks
from fleetops.rollout.guardrails import threshold_problems
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
