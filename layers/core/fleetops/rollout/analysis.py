"""Canary analysis: canary vs baseline numbers in, pass / fail / inconclusive out, with the reasons.

Rules (all thresholds are fields of :class:`Thresholds`, overridable per rollout):

- fewer than ``min_requests`` canary requests in the window → inconclusive (never promote on no data);
- canary error rate above ``max_error_rate`` or above the baseline's by more than
  ``max_error_rate_increase`` → fail;
- canary p95 latency or p95 time-to-first-token more than ``max_latency_regression`` (a fraction)
  above the baseline's → fail (skipped when the baseline has no value);
- OOMs caught, breaker trips or engine restarts on the canary above their maximum → fail.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["pass", "fail", "inconclusive"]


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_requests: int = Field(default=200, ge=1, description="canary requests needed for a verdict")
    max_error_rate: float = Field(default=0.02, ge=0, le=1)
    max_error_rate_increase: float = Field(default=0.01, ge=0, le=1, description="over the baseline, absolute")
    max_latency_regression: float = Field(default=0.2, ge=0, description="p95 latency/TTFT over baseline, fraction")
    max_oom: int = Field(default=0, ge=0)
    max_breaker_trips: int = Field(default=0, ge=0)
    max_engine_restarts: int = Field(default=0, ge=0)


class VariantStats(BaseModel):
    """What one variant did in the analysis window (None: no datapoints)."""

    model_config = ConfigDict(frozen=True)

    variant_name: str
    requests: float = 0.0
    errors: float = 0.0
    p95_latency_ms: float | None = None
    p95_ttft_ms: float | None = None
    oom: float = 0.0
    breaker_trips: float = 0.0
    engine_restarts: float = 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


class Analysis(BaseModel):
    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    reasons: tuple[str, ...]
    canary: VariantStats
    baseline: VariantStats
    summary: str


def _regression(name: str, canary: float | None, baseline: float | None, limit: float) -> str | None:
    if canary is None or baseline is None or baseline <= 0:
        return None
    if canary > baseline * (1 + limit):
        return (
            f"{name} {canary:.0f} ms is {canary / baseline - 1:.0%} above baseline {baseline:.0f} ms (max {limit:.0%})"
        )
    return None


def analyse(canary: VariantStats, baseline: VariantStats, thresholds: Thresholds) -> Analysis:
    """Compare the canary with the baseline.

    Examples
    --------
    >>> t = Thresholds(min_requests=10)
    >>> analyse(VariantStats(variant_name="c", requests=5), VariantStats(variant_name="p", requests=500), t).verdict
    'inconclusive'
    >>> c = VariantStats(variant_name="c", requests=100, errors=9)
    >>> analyse(c, VariantStats(variant_name="p", requests=900, errors=9), t).verdict
    'fail'
    """
    reasons: list[str] = []
    if canary.requests < thresholds.min_requests:
        reasons.append(f"only {canary.requests:.0f} canary requests, need {thresholds.min_requests}")
        verdict: Verdict = "inconclusive"
    else:
        if canary.error_rate > thresholds.max_error_rate:
            reasons.append(f"error rate {canary.error_rate:.2%} above {thresholds.max_error_rate:.2%}")
        if canary.error_rate > baseline.error_rate + thresholds.max_error_rate_increase:
            reasons.append(
                f"error rate {canary.error_rate:.2%} vs baseline {baseline.error_rate:.2%} "
                f"(max increase {thresholds.max_error_rate_increase:.2%})"
            )
        for name, c, b in (
            ("p95 latency", canary.p95_latency_ms, baseline.p95_latency_ms),
            ("p95 TTFT", canary.p95_ttft_ms, baseline.p95_ttft_ms),
        ):
            found = _regression(name, c, b, thresholds.max_latency_regression)
            if found:
                reasons.append(found)
        for name, value, limit in (
            ("OOMs caught", canary.oom, thresholds.max_oom),
            ("breaker trips", canary.breaker_trips, thresholds.max_breaker_trips),
            ("engine restarts", canary.engine_restarts, thresholds.max_engine_restarts),
        ):
            if value > limit:
                reasons.append(f"{name} {value:.0f} above {limit}")
        verdict = "fail" if reasons else "pass"
    summary = (
        f"{verdict.upper()}: canary {canary.requests:.0f} req, {canary.error_rate:.2%} errors, "
        f"p95 {_ms(canary.p95_latency_ms)}, TTFT p95 {_ms(canary.p95_ttft_ms)}, OOM {canary.oom:.0f}, "
        f"breaker {canary.breaker_trips:.0f}, restarts {canary.engine_restarts:.0f} | baseline "
        f"{baseline.requests:.0f} req, {baseline.error_rate:.2%} errors, p95 {_ms(baseline.p95_latency_ms)}, "
        f"TTFT p95 {_ms(baseline.p95_ttft_ms)}"
    )
    if reasons:
        summary += " | " + "; ".join(reasons)
    return Analysis(verdict=verdict, reasons=tuple(reasons), canary=canary, baseline=baseline, summary=summary)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"
