"""Canary analysis: canary vs baseline numbers in, pass / fail / inconclusive out, with the reasons.

What is judged is declared in ``fleet_config/canary_checks.yaml`` (:mod:`fleetops.rollout.checks`), each
limit overridable per rollout. A canary short of any ``minimum_sample`` check is inconclusive whatever else
happened (never promote on no data); otherwise any failed check fails it. Every check gives one line of
the result, judged or not, so the analysis shows what it looked at.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleetops.metrics import unit_of
from fleetops.rollout.checks import CanaryCheck, CanaryChecks, Series
from fleetops.validation import StrictModel

Verdict = Literal["pass", "fail", "inconclusive"]
#: ``not_judged``: no value to compare (no datapoints, no baseline), or the sample was too small.
Outcome = Literal["pass", "fail", "inconclusive", "not_judged"]


class VariantStats(StrictModel):
    """What one variant did in the analysis window, by :attr:`Series.key` (None or absent: no datapoints)."""

    variant_name: str
    values: dict[str, float | None] = Field(default_factory=dict)

    def of(self, series: Series) -> float | None:
        return self.values.get(series.key)


class CheckResult(StrictModel):
    """One check's line: the values compared, the limit applied, the outcome and, unless it passed, why."""

    name: str
    outcome: Outcome
    canary: float | None
    baseline: float | None
    limit: float
    reason: str | None = None


class Analysis(StrictModel):
    verdict: Verdict
    reasons: tuple[str, ...]
    checks: tuple[CheckResult, ...]
    canary: VariantStats
    baseline: VariantStats
    summary: str


def value(check: CanaryCheck, stats: VariantStats) -> float | None:
    """The check's value for one variant; a ratio is 0 when its divisor is (no requests, no error rate)."""
    measured = stats.of(Series(check.metric, check.statistic))
    if check.divided_by is None:
        return measured
    divisor = stats.of(Series(check.divided_by, check.statistic))
    if measured is None or divisor is None:
        return None
    return measured / divisor if divisor else 0.0


def show(check: CanaryCheck, number: float | None) -> str:
    """A value or limit as people read it: ratios as percentages, milliseconds with their unit."""
    if number is None:
        return "n/a"
    if check.divided_by is not None:
        return f"{number:.2%}"
    unit = unit_of(check.metric)
    if unit == "Milliseconds":
        return f"{number:.0f} ms"
    if unit == "Percent":
        return f"{number:.1f}%"
    return f"{number:.0f}" if float(number).is_integer() else f"{number:.2f}"


def judge(name: str, check: CanaryCheck, canary: VariantStats, baseline: VariantStats) -> CheckResult:
    """Apply one check to the canary (and, by its kind, the baseline)."""
    c, b, limit = value(check, canary), value(check, baseline), check.limit
    c_text, b_text, limit_text = show(check, c), show(check, b), show(check, limit)
    outcome: Outcome = "pass"
    reason = None
    if check.compare == "minimum_sample":
        if (c or 0.0) < limit:
            outcome, reason = "inconclusive", f"only {show(check, c or 0.0)} {check.label}, need {limit_text}"
    elif c is None:
        outcome = "not_judged"
    elif check.compare == "maximum":
        if c > limit:
            outcome, reason = "fail", f"{check.label} {c_text} above {limit_text}"
    elif b is None or (check.compare == "baseline_regression" and b <= 0):
        outcome = "not_judged"
    elif check.compare == "baseline_increase":
        if c > b + limit:
            outcome, reason = "fail", f"{check.label} {c_text} vs baseline {b_text} (max increase {limit_text})"
    elif c > b * (1 + limit):  # baseline_regression: the limit is a fraction of the baseline
        outcome = "fail"
        reason = f"{check.label} {c_text} is {c / b - 1:.0%} above baseline {b_text} (max {limit:.0%})"
    return CheckResult(name=name, outcome=outcome, canary=c, baseline=b, limit=limit, reason=reason)


def analyse(canary: VariantStats, baseline: VariantStats, checks: CanaryChecks) -> Analysis:
    """Compare the canary with the baseline under ``checks`` (a rollout's overrides already applied).

    Examples
    --------
    >>> from fleetops.rollout.checks import Thresholds, load_canary_checks
    >>> checks = load_canary_checks().with_overrides(Thresholds(min_requests=10))
    >>> def stats(name, requests, errors):
    ...     return VariantStats(variant_name=name, values={"Requests:Sum": requests, "RequestErrors:Sum": errors})
    >>> analyse(stats("c", 5, 0), stats("p", 500, 0), checks).verdict
    'inconclusive'
    >>> analyse(stats("c", 100, 9), stats("p", 900, 9), checks).reasons
    ('error rate 9.00% above 2.00%', 'error rate 9.00% vs baseline 1.00% (max increase 1.00%)')
    """
    samples = [judge(n, c, canary, baseline) for n, c in checks.checks.items() if c.compare == "minimum_sample"]
    short = [r for r in samples if r.outcome == "inconclusive"]
    results = tuple(
        CheckResult(name=n, outcome="not_judged", canary=value(c, canary), baseline=value(c, baseline), limit=c.limit)
        if short and c.compare != "minimum_sample"
        else judge(n, c, canary, baseline)
        for n, c in checks.checks.items()
    )
    reasons = tuple(r.reason for r in results if r.reason)
    verdict: Verdict = "inconclusive" if short else "fail" if reasons else "pass"
    return Analysis(
        verdict=verdict,
        reasons=reasons,
        checks=results,
        canary=canary,
        baseline=baseline,
        summary=_summary(verdict, canary, baseline, checks, reasons),
    )


def _summary(
    verdict: Verdict, canary: VariantStats, baseline: VariantStats, checks: CanaryChecks, reasons: tuple[str, ...]
) -> str:
    # The baseline's side shows its traffic and what the canary is compared with, not canary-only maxima.
    shown = [c for c in checks.checks.values() if c.summary]
    ours = ", ".join(_line(c, canary) for c in shown)
    theirs = ", ".join(_line(c, baseline) for c in shown if c.compare != "maximum")
    summary = f"{verdict.upper()}: canary {ours} | baseline {theirs}"
    return summary + " | " + "; ".join(reasons) if reasons else summary


def _line(check: CanaryCheck, stats: VariantStats) -> str:
    return (check.summary or "{}").replace("{}", show(check, value(check, stats)))
