"""Canary verdicts: minimum sample size, error rate, latency and TTFT regressions, OOM/breaker/restarts."""

from __future__ import annotations

from typing import Any

import pytest

from fleetops.rollout.analysis import Thresholds, VariantStats, analyse

T = Thresholds(min_requests=100)


def stats(name: str, **values: Any) -> VariantStats:
    base: dict[str, Any] = {"requests": 1000, "errors": 2, "p95_latency_ms": 1000.0, "p95_ttft_ms": 300.0}
    return VariantStats(variant_name=name, **(base | values))


def test_a_canary_like_its_baseline_passes_and_the_summary_carries_the_numbers() -> None:
    result = analyse(stats("canary"), stats("primary"), T)
    assert result.verdict == "pass" and result.reasons == ()
    assert "canary 1000 req, 0.20% errors, p95 1000 ms, TTFT p95 300 ms" in result.summary


def test_too_few_canary_requests_is_inconclusive_whatever_else_happens() -> None:
    result = analyse(stats("canary", requests=99, errors=50), stats("primary"), T)
    assert result.verdict == "inconclusive" and "only 99 canary requests, need 100" in result.reasons[0]


@pytest.mark.parametrize(
    ("canary", "reason"),
    [
        ({"errors": 30}, "error rate 3.00% above 2.00%"),
        ({"errors": 15}, "error rate 1.50% vs baseline 0.20%"),
        ({"p95_latency_ms": 1300.0}, "p95 latency 1300 ms is 30% above baseline 1000 ms"),
        ({"p95_ttft_ms": 400.0}, "p95 TTFT 400 ms is 33% above baseline 300 ms"),
        ({"oom": 1}, "OOMs caught 1 above 0"),
        ({"breaker_trips": 2}, "breaker trips 2 above 0"),
        ({"engine_restarts": 1}, "engine restarts 1 above 0"),
    ],
)
def test_each_regression_fails_the_canary_with_its_reason(canary: dict[str, Any], reason: str) -> None:
    result = analyse(stats("canary", **canary), stats("primary"), T)
    assert result.verdict == "fail"
    assert any(reason in r for r in result.reasons), result.reasons


def test_a_small_latency_increase_within_the_limit_passes() -> None:
    assert analyse(stats("canary", p95_latency_ms=1190.0), stats("primary"), T).verdict == "pass"


def test_latency_is_not_judged_without_a_baseline_value() -> None:
    result = analyse(stats("canary", p95_latency_ms=5000.0), stats("primary", p95_latency_ms=None), T)
    assert result.verdict == "pass"


def test_thresholds_are_per_rollout() -> None:
    lenient = Thresholds(min_requests=100, max_oom=3)
    assert analyse(stats("canary", oom=2), stats("primary"), lenient).verdict == "pass"
