"""Canary verdicts under the shipped checks: sample size, error rate, latency/TTFT regressions, OOM/breaker/restarts."""

from __future__ import annotations

from typing import Any

import pytest

from fleetops.rollout.analysis import VariantStats, analyse
from fleetops.rollout.checks import load_canary_checks
from fleetops.rollout.thresholds import Thresholds

SHIPPED = load_canary_checks()
T = SHIPPED.with_overrides(Thresholds(min_requests=100))
#: The series the shipped checks read, by the names these tests use.
KEYS = {
    "requests": "Requests:Sum",
    "errors": "RequestErrors:Sum",
    "p95_latency_ms": "RequestLatencyMs:p95",
    "p95_ttft_ms": "TimeToFirstTokenMs:p95",
    "oom": "OomCaught:Sum",
    "breaker_trips": "BreakerTrips:Sum",
    "engine_restarts": "EngineRestarts:Sum",
}


def stats(name: str, **values: Any) -> VariantStats:
    base: dict[str, Any] = {
        "requests": 1000,
        "errors": 2,
        "p95_latency_ms": 1000.0,
        "p95_ttft_ms": 300.0,
        "oom": 0,
        "breaker_trips": 0,
        "engine_restarts": 0,
    }
    return VariantStats(variant_name=name, values={KEYS[k]: v for k, v in (base | values).items()})


def test_a_canary_like_its_baseline_passes_and_the_summary_carries_the_numbers() -> None:
    result = analyse(stats("canary"), stats("primary"), T)
    assert result.verdict == "pass" and result.reasons == ()
    assert result.summary == (
        "PASS: canary 1000 req, 0.20% errors, p95 1000 ms, TTFT p95 300 ms, OOM 0, breaker 0, restarts 0"
        " | baseline 1000 req, 0.20% errors, p95 1000 ms, TTFT p95 300 ms"
    )
    assert {r.outcome for r in result.checks} == {"pass"}


def test_every_declared_check_gives_a_line_with_its_values_and_limit() -> None:
    result = analyse(stats("canary", errors=30), stats("primary"), T)
    lines = {r.name: r for r in result.checks}
    assert list(lines) == list(SHIPPED.checks)
    assert (lines["error-rate"].outcome, lines["error-rate"].canary, lines["error-rate"].limit) == ("fail", 0.03, 0.005)
    assert lines["error-rate"].reason == "absolute SLO: error rate 3.00% above 0.50%"
    assert (lines["requests"].outcome, lines["requests"].limit) == ("pass", 100.0)
    assert (lines["p95-ttft"].outcome, lines["p95-ttft"].baseline, lines["p95-ttft"].reason) == ("pass", 300.0, None)
    gates = {r.name: r.gate for r in result.checks}
    assert (gates["requests"], gates["error-rate"], gates["ttft-slo"], gates["p95-ttft"]) == (
        "sample",
        "absolute",
        "absolute",
        "relative",
    )


def test_too_few_canary_requests_is_inconclusive_whatever_else_happens() -> None:
    result = analyse(stats("canary", requests=99, errors=50), stats("primary"), T)
    assert result.verdict == "inconclusive"
    assert result.reasons == ("sample size: only 99 canary requests, need 100",)
    assert {r.outcome for r in result.checks if r.name != "requests"} == {"not_judged"}
    assert result.summary.startswith("INCONCLUSIVE (sample size): canary 99 req, 50.51% errors")


@pytest.mark.parametrize(
    ("canary", "reason"),
    [
        ({"errors": 30}, "absolute SLO: error rate 3.00% above 0.50%"),
        ({"errors": 16}, "absolute SLO: error rate 1.60% above 0.50%"),
        ({"errors": 20}, "relative to baseline: error rate 2.00% vs baseline 0.20%"),
        ({"p95_latency_ms": 1300.0}, "relative to baseline: p95 latency 1300 ms is 30% above baseline 1000 ms"),
        ({"p95_ttft_ms": 400.0}, "relative to baseline: p95 TTFT 400 ms is 33% above baseline 300 ms"),
        ({"oom": 1}, "absolute SLO: OOMs caught 1 above 0"),
        ({"breaker_trips": 2}, "absolute SLO: breaker trips 2 above 0"),
        ({"engine_restarts": 1}, "absolute SLO: engine restarts 1 above 0"),
    ],
)
def test_each_regression_fails_the_canary_with_its_reason(canary: dict[str, Any], reason: str) -> None:
    result = analyse(stats("canary", **canary), stats("primary"), T)
    assert result.verdict == "fail"
    assert any(reason in r for r in result.reasons), result.reasons
    # The summary's head names the gate that failed; its tail lists every reason.
    head = result.summary.split(": canary ")[0]
    assert head.startswith("FAIL (") and reason.partition(": ")[0] in head, head
    assert result.summary.endswith(" | " + "; ".join(result.reasons))


def test_the_reasons_keep_the_full_wording() -> None:
    result = analyse(stats("canary", errors=20, p95_latency_ms=1300.0), stats("primary"), T)
    assert result.reasons == (
        "absolute SLO: error rate 2.00% above 0.50%",
        "relative to baseline: error rate 2.00% vs baseline 0.20% (max increase 0.10%)",
        "relative to baseline: p95 latency 1300 ms is 30% above baseline 1000 ms (max 5%)",
    )
    assert result.summary.startswith("FAIL (absolute SLO, relative to baseline): canary 1000 req")


def test_a_small_latency_increase_within_the_limit_passes() -> None:
    assert analyse(stats("canary", p95_latency_ms=1040.0), stats("primary"), T).verdict == "pass"


def test_no_canary_requests_is_no_error_rate() -> None:
    result = analyse(stats("canary", requests=0, errors=0), stats("primary"), T)
    assert result.verdict == "inconclusive" and result.reasons == ("sample size: only 0 canary requests, need 100",)


def test_thresholds_are_per_rollout() -> None:
    lenient = SHIPPED.with_overrides(Thresholds(min_requests=100, max_oom=3))
    assert analyse(stats("canary", oom=2), stats("primary"), lenient).verdict == "pass"
    assert analyse(stats("canary", oom=2), stats("primary"), T).verdict == "fail"


@pytest.mark.parametrize("name", ["p95-latency", "p95-ttft"])
def test_one_request_threshold_overrides_every_check_that_names_it(name: str) -> None:
    loose = SHIPPED.with_overrides(Thresholds(min_requests=100, max_latency_regression=0.5))
    assert loose.checks[name].limit == 0.5
    canary = stats("canary", p95_latency_ms=1400.0, p95_ttft_ms=420.0)
    assert analyse(canary, stats("primary"), loose).verdict == "pass"
    assert analyse(canary, stats("primary"), T).verdict == "fail"


def test_the_shipped_defaults_are_the_limits_a_request_did_not_set() -> None:
    limits = {name: check.limit for name, check in SHIPPED.checks.items()}
    assert limits == {
        "requests": 200,
        "error-rate": 0.005,
        "error-rate-increase": 0.001,
        "p95-latency": 0.05,
        "p95-ttft": 0.05,
        "latency-slo": 10000,
        "ttft-slo": 500,
        "oom": 0,
        "breaker-trips": 0,
        "engine-restarts": 0,
    }
    assert SHIPPED.with_overrides(Thresholds()) == SHIPPED
    with_sample = SHIPPED.with_overrides(Thresholds(min_requests=5))
    assert (
        with_sample.checks["requests"].limit == 5 and with_sample.checks["error-rate"] == SHIPPED.checks["error-rate"]
    )


def test_an_error_rate_over_the_slo_not_yet_beyond_chance_bakes_again_and_its_line_says_how_likely() -> None:
    # 6 errors in 1000 requests: P(>= 6 | 1000, 0.5 %) is 0.38, not shown over the SLO, but never a pass either.
    result = analyse(stats("canary", errors=6), stats("primary"), T)
    line = next(c for c in result.checks if c.name == "error-rate")
    assert result.verdict == "inconclusive" and line.outcome == "inconclusive" and line.canary == 0.006
    assert line.p_value is not None and 0.3 < line.p_value < 0.45
    assert line.reason == "absolute SLO: error rate 0.60% above 0.50%, not yet beyond chance (p 0.38): bake longer"
    assert result.summary.startswith("INCONCLUSIVE (absolute SLO): canary 1000 req, 0.60% errors")


def test_the_same_rate_on_more_requests_fails_and_one_at_the_slo_passes() -> None:
    # The extension bakes on the same window, so the counts grow: 0.7 % of 20,000 is beyond chance (p 0.00009),
    # 0.6 % of them not yet (p 0.03). The primary is as bad: only the absolute gate speaks.
    more = analyse(stats("canary", requests=20000, errors=140), stats("primary", requests=20000, errors=140), T)
    line = next(c for c in more.checks if c.name == "error-rate")
    assert more.verdict == "fail" and line.p_value is not None and line.p_value < 0.0005
    assert more.reasons == ("absolute SLO: error rate 0.70% above 0.50%",)
    fewer = analyse(stats("canary", requests=20000, errors=120), stats("primary", requests=20000, errors=120), T)
    assert fewer.verdict == "inconclusive"
    assert analyse(stats("canary", errors=5), stats("primary"), T).verdict == "pass"  # 0.50 %: not above
