"""Canary analysis: canary vs baseline numbers in, pass / fail / inconclusive out, with the reasons.

What is judged is declared in ``fleet_config/canary_checks.yaml`` (:mod:`fleetops.rollout.checks`), each
limit overridable per rollout (only tighter). Three kinds of gate: the sample size, absolute limits on the
canary alone (its SLOs) and limits relative to the baseline. No data never passes: a canary short of any
``minimum_sample`` check is inconclusive whatever else happened, and so is one with no value for a check;
a relative check whose baseline has no value is judged against the absolute gate on its series instead.
Otherwise any failed check fails it. Every check gives one line of the result, judged or not, so the
analysis shows what it looked at, and each reason names its gate.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleetops.metrics import unit_of
from fleetops.rollout.checks import CanaryCheck, CanaryChecks, Gate, Series
from fleetops.validation import StrictModel

Verdict = Literal["pass", "fail", "inconclusive"]
#: ``not_judged``: the sample was too small to judge anything else.
Outcome = Literal["pass", "fail", "inconclusive", "not_judged"]
#: How a gate reads in a reason and in the summary's head ("FAIL (absolute SLO): ...").
GATE_NAME: dict[Gate, str] = {"sample": "sample size", "absolute": "absolute SLO", "relative": "relative to baseline"}
#: The head of a reason (and of the summary) when the canary had no value for a check.
NO_DATA = "no canary data"


class VariantStats(StrictModel):
    """What one variant did in the analysis window, by :attr:`Series.key` (None or absent: no datapoints)."""

    variant_name: str
    values: dict[str, float | None] = Field(default_factory=dict)

    def of(self, series: Series) -> float | None:
        """The value; a count without datapoints is 0 (nothing happened), as CloudWatch's sums read."""
        found = self.values.get(series.key)
        return 0.0 if found is None and series.additive else found


class CheckResult(StrictModel):
    """One check's line: the values compared, the limit applied, the outcome and, unless it passed, why.

    ``gate`` is the kind of limit that was applied; ``judged_by`` names the absolute gate whose limit judged a
    relative check whose baseline had no value.
    """

    name: str
    gate: Gate
    outcome: Outcome
    canary: float | None
    baseline: float | None
    limit: float
    reason: str | None = None
    judged_by: str | None = None


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


def judge(
    name: str, check: CanaryCheck, canary: VariantStats, baseline: VariantStats, checks: CanaryChecks
) -> CheckResult:
    """Apply one check to the canary (and, by its kind, the baseline); ``checks`` holds its absolute gates."""
    c, b = value(check, canary), value(check, baseline)
    line = CheckResult(name=name, gate=check.gate, outcome="pass", canary=c, baseline=b, limit=check.limit)
    if check.compare == "minimum_sample":
        c = c or 0.0
        short = f"{GATE_NAME['sample']}: only {show(check, c)} {check.label}, need {show(check, check.limit)}"
        return _unless(line, c < check.limit, "inconclusive", short)
    if c is None:  # a percentile without datapoints: nothing to judge, so never a pass
        return _unless(line, True, "inconclusive", f"{NO_DATA}: no {check.label} on the canary in the bake window")
    if check.compare == "maximum":
        return _unless(line, c > check.limit, "fail", _above(check, c, check.limit))
    if b is None or (check.compare == "baseline_regression" and b <= 0):
        return _without_baseline(line, check, c, checks)
    c_text, b_text, limit = show(check, c), show(check, b), check.limit
    if check.compare == "baseline_increase":
        failed = c > b + limit
        text = f"{check.label} {c_text} vs baseline {b_text} (max increase {show(check, limit)})"
    else:  # baseline_regression: the limit is a fraction of the baseline
        failed = c > b * (1 + limit)
        text = f"{check.label} {c_text} is {c / b - 1:.0%} above baseline {b_text} (max {limit:.0%})"
    return _unless(line, failed, "fail", f"{GATE_NAME['relative']}: {text}")


def _unless(line: CheckResult, failed: bool, outcome: Outcome, reason: str) -> CheckResult:
    """``line`` as it is (a pass), or with ``outcome`` and ``reason`` when ``failed``."""
    return line.model_copy(update={"outcome": outcome, "reason": reason}) if failed else line


def _above(check: CanaryCheck, c: float, limit: float) -> str:
    return f"{GATE_NAME['absolute']}: {check.label} {show(check, c)} above {show(check, limit)}"


def _without_baseline(line: CheckResult, check: CanaryCheck, c: float, checks: CanaryChecks) -> CheckResult:
    """A relative check with nothing to compare with: the tightest absolute gate on its series judges the canary.

    A failure reads as that gate's own reason, so the verdict lists it once.
    """
    gates = sorted(checks.absolute_gates(check), key=lambda name: checks.checks[name].limit)
    if not gates:  # a check list the loader did not validate: still no pass without a comparison
        reason = f"{GATE_NAME['relative']}: the baseline has no {check.label} and no absolute gate covers it"
        return _unless(line, True, "inconclusive", reason)
    gate = checks.checks[gates[0]]
    judged = line.model_copy(update={"gate": "absolute", "limit": gate.limit, "judged_by": gates[0]})
    return _unless(judged, c > gate.limit, "fail", _above(gate, c, gate.limit))


def analyse(canary: VariantStats, baseline: VariantStats, checks: CanaryChecks) -> Analysis:
    """Compare the canary with the baseline under ``checks`` (a rollout's overrides already applied).

    Examples
    --------
    >>> from fleetops.rollout.checks import Thresholds, load_canary_checks
    >>> checks = load_canary_checks().with_overrides(Thresholds(min_requests=10))
    >>> def stats(name, requests, errors, ttft=300.0):
    ...     values = {"Requests:Sum": requests, "RequestErrors:Sum": errors, "TimeToFirstTokenMs:p95": ttft}
    ...     return VariantStats(variant_name=name, values=values | {"RequestLatencyMs:p95": 900.0})
    >>> analyse(stats("c", 5, 0), stats("p", 500, 0), checks).verdict
    'inconclusive'
    >>> for reason in analyse(stats("c", 100, 9), stats("p", 900, 9), checks).reasons:
    ...     print(reason)
    absolute SLO: error rate 9.00% above 0.50%
    relative to baseline: error rate 9.00% vs baseline 1.00% (max increase 1.00%)
    >>> analyse(stats("c", 100, 0, ttft=None), stats("p", 900, 0), checks).reasons
    ('no canary data: no p95 TTFT on the canary in the bake window',)
    """
    samples = [judge(n, c, canary, baseline, checks) for n, c in checks.checks.items() if c.gate == "sample"]
    short = any(r.outcome == "inconclusive" for r in samples)
    results = tuple(
        CheckResult(
            name=n,
            gate=c.gate,
            outcome="not_judged",
            canary=value(c, canary),
            baseline=value(c, baseline),
            limit=c.limit,
        )
        if short and c.gate != "sample"
        else judge(n, c, canary, baseline, checks)
        for n, c in checks.checks.items()
    )
    # A relative check judged by its absolute gate fails with that gate's words: list each reason once.
    reasons = tuple(dict.fromkeys(r.reason for r in results if r.reason))
    outcomes = {r.outcome for r in results}
    verdict: Verdict = "fail" if "fail" in outcomes else "inconclusive" if "inconclusive" in outcomes else "pass"
    return Analysis(
        verdict=verdict,
        reasons=reasons,
        checks=results,
        canary=canary,
        baseline=baseline,
        summary=_summary(verdict, results, canary, baseline, checks, reasons),
    )


def _summary(
    verdict: Verdict,
    results: tuple[CheckResult, ...],
    canary: VariantStats,
    baseline: VariantStats,
    checks: CanaryChecks,
    reasons: tuple[str, ...],
) -> str:
    # The head names the gates that decided ("FAIL (absolute SLO)"); the baseline's side shows its traffic and
    # what the canary is compared with, not canary-only maxima.
    deciding = [_why(r) for r in results if r.outcome == verdict and verdict != "pass"]
    head = f"{verdict.upper()} ({', '.join(dict.fromkeys(deciding))})" if deciding else verdict.upper()
    shown = [c for c in checks.checks.values() if c.summary]
    ours = ", ".join(_line(c, canary) for c in shown)
    theirs = ", ".join(_line(c, baseline) for c in shown if c.compare != "maximum")
    summary = f"{head}: canary {ours} | baseline {theirs}"
    return summary + " | " + "; ".join(reasons) if reasons else summary


def _why(result: CheckResult) -> str:
    return NO_DATA if result.gate != "sample" and result.canary is None else GATE_NAME[result.gate]


def _line(check: CanaryCheck, stats: VariantStats) -> str:
    return (check.summary or "{}").replace("{}", show(check, value(check, stats)))
