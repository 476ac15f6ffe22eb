"""Canary analysis: canary vs baseline numbers in, pass / fail / inconclusive out, with the reasons.

What is judged is declared in ``fleet_config/canary_checks.yaml`` (:mod:`fleetops.rollout.checks`), each
limit overridable per rollout (only tighter). Three kinds of gate: the sample size, absolute limits on the
canary alone (its SLOs) and limits relative to the baseline. No data never passes: a canary short of any
``minimum_sample`` check is inconclusive whatever else happened, and so is one with no value for a check;
a relative check whose baseline has no value is judged against the absolute gate on its series instead.
Otherwise any failed check fails it. Every check gives one line of the result, judged or not, so the
analysis shows what it looked at, and each reason names its gate.

A check on a rate (errors over requests) or on a percentile fails only when its point value is over the limit
and the request counts behind it make chance an unlikely cause (``p_value`` below
:data:`fleetops.rollout.significance.ALPHA`; :mod:`fleetops.rollout.significance` says which test); an SLO's
value over its limit but not beyond chance is inconclusive while the count is more likely above the SLO than at
it, and passes otherwise. A percentile's counts are the requests at or below an SLO's limit or multiples of the
baseline's value (:func:`tail_series`, read in a second query); without them the point values alone judge.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleetops.metrics import unit_of
from fleetops.rollout.checks import CanaryCheck, CanaryChecks, Gate, Series
from fleetops.rollout.significance import (
    ALPHA,
    BOUNDS,
    HOLD,
    bins,
    excess_p_value,
    rate_above_p_value,
    slower_p_value,
)
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
    #: How likely chance alone gives a canary this much worse (the test of :mod:`fleetops.rollout.significance`);
    #: None where no test applies (a count, or a percentile against a fixed limit) or its counts were not read.
    p_value: float | None = None


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
        return _over_maximum(line, check, c, canary, check.limit)
    if b is None or (check.compare == "baseline_regression" and b <= 0):
        return _without_baseline(line, check, c, canary, checks)
    c_text, b_text, limit = show(check, c), show(check, b), check.limit
    if check.compare == "baseline_increase":
        failed = c > b + limit
        text = f"{check.label} {c_text} vs baseline {b_text} (max increase {show(check, limit)})"
    else:  # baseline_regression: the limit is a fraction of the baseline
        failed = c > b * (1 + limit)
        text = f"{check.label} {c_text} is {c / b - 1:.0%} above baseline {b_text} (max {limit:.0%})"
    p = _relative_p_value(check, canary, baseline, b) if failed else None
    if p is not None:
        line = line.model_copy(update={"p_value": p})
        failed = p < ALPHA
    return _unless(line, failed, "fail", f"{GATE_NAME['relative']}: {text}")


def tail_series(checks: CanaryChecks, baseline: VariantStats) -> tuple[Series, ...]:
    """What the checks on percentiles need besides the percentiles, for both variants: the values' count and the
    share at or below a bound (CloudWatch's percentile rank, ``PR(:bound)``): an absolute gate's limit, and each
    multiple of :data:`BOUNDS` of the baseline's value for a check against the baseline (none where the baseline
    has no value: nothing to compare with).

    Examples
    --------
    >>> from fleetops.rollout.checks import load_canary_checks
    >>> baseline = VariantStats(variant_name="p", values={"TimeToFirstTokenMs:p95": 400.0})
    >>> [s.key for s in tail_series(load_canary_checks(), baseline)][:3]
    ['TimeToFirstTokenMs:SampleCount', 'TimeToFirstTokenMs:PR(:120)', 'TimeToFirstTokenMs:PR(:160)']
    >>> [s.key for s in tail_series(load_canary_checks(), baseline)][-2:]
    ['RequestLatencyMs:PR(:10000)', 'TimeToFirstTokenMs:PR(:500)']
    """
    found: dict[Series, None] = {}
    for check in checks.checks.values():
        if check.divided_by is not None or _percentile(check.statistic) is None:
            continue
        if check.compare == "maximum":
            found.update({Series(check.metric, "SampleCount"): None, Series(check.metric, _rank(check.limit)): None})
            continue
        value_b = baseline.values.get(Series(check.metric, check.statistic).key)
        if check.compare != "baseline_regression" or not value_b:
            continue
        found[Series(check.metric, "SampleCount")] = None
        found.update({Series(check.metric, _rank(value_b * bound)): None for bound in BOUNDS})
    return tuple(found)


def _rank(bound: float) -> str:
    return f"PR(:{bound:.6g})"


def _relative_p_value(check: CanaryCheck, canary: VariantStats, baseline: VariantStats, b: float) -> float | None:
    if check.divided_by is not None and check.statistic == "Sum":
        counts = [v.of(Series(m, "Sum")) for v in (canary, baseline) for m in (check.metric, check.divided_by)]
        k_c, n_c, k_b, n_b = (round(x or 0.0) for x in counts)
        return excess_p_value(k_c, n_c, k_b, n_b)
    if check.divided_by is not None:
        return None
    ranks = [_rank(b * bound) for bound in BOUNDS]
    per_variant = []
    for stats in (canary, baseline):
        count = stats.values.get(Series(check.metric, "SampleCount").key)
        shares = [stats.values.get(Series(check.metric, r).key) for r in ranks]
        if not count or any(share is None for share in shares):
            return None  # not read: the point values judge alone
        per_variant.append(bins([round(count * (share or 0.0) / 100) for share in shares], count))
    (canary_bins, baseline_bins), at = per_variant, BOUNDS.index(1.0) + 1
    above_c, above_b = sum(canary_bins[at:]), sum(baseline_bins[at:])
    tail = excess_p_value(int(above_c), int(sum(canary_bins)), int(above_b), int(sum(baseline_bins)))
    return min(1.0, 2 * min(slower_p_value(canary_bins, baseline_bins), tail))


def _over_maximum(line: CheckResult, check: CanaryCheck, c: float, canary: VariantStats, limit: float) -> CheckResult:
    """An absolute gate: over its limit fails. On a rate or a percentile whose counts were read, the count over the
    limit (errors; requests slower than the limit) is tested against the share the SLO allows: beyond chance
    (p below :data:`ALPHA`) fails; more than chance gives a canary right at the SLO (p below :data:`HOLD`) is
    inconclusive, never a pass: the step bakes again on the same window, so the counts grow until the canary is
    shown over the SLO or back within it, or the extensions run out (roll back); within chance of the SLO passes.
    """
    reason = _above(check, c, limit)
    counted = _over_counts(check, canary, limit)
    if c <= limit or counted is None:
        return _unless(line, c > limit, "fail", reason)
    over, trials, allowed = counted
    p = rate_above_p_value(over, trials, allowed)
    line = line.model_copy(update={"p_value": p})
    if p < ALPHA:
        return _unless(line, True, "fail", reason)
    return _unless(line, p < HOLD, "inconclusive", f"{reason}, not yet beyond chance (p {p:.2g}): bake longer")


def _over_counts(check: CanaryCheck, canary: VariantStats, limit: float) -> tuple[int, int, float] | None:
    """The canary's count over the limit, its trials and the share over it the limit allows; None when a
    percentile's counts were not read (the point value then judges alone)."""
    if check.divided_by is not None:
        if check.statistic != "Sum":
            return None
        events, trials = (round(canary.of(Series(m, "Sum")) or 0.0) for m in (check.metric, check.divided_by))
        return events, trials, limit
    quantile = _percentile(check.statistic)
    count = canary.values.get(Series(check.metric, "SampleCount").key)
    share = canary.values.get(Series(check.metric, _rank(limit)).key)
    if quantile is None or not count or share is None:
        return None
    trials = round(count)
    return trials - round(count * share / 100), trials, 1 - quantile / 100


def _percentile(statistic: str) -> float | None:
    """95.0 for ``p95``; None for a statistic that is no percentile."""
    return float(statistic[1:]) if statistic.startswith("p") else None


def _unless(line: CheckResult, failed: bool, outcome: Outcome, reason: str) -> CheckResult:
    """``line`` as it is (a pass), or with ``outcome`` and ``reason`` when ``failed``."""
    return line.model_copy(update={"outcome": outcome, "reason": reason}) if failed else line


def _above(check: CanaryCheck, c: float, limit: float) -> str:
    return f"{GATE_NAME['absolute']}: {check.label} {show(check, c)} above {show(check, limit)}"


def _without_baseline(
    line: CheckResult, check: CanaryCheck, c: float, canary: VariantStats, checks: CanaryChecks
) -> CheckResult:
    """A relative check with nothing to compare with: the tightest absolute gate on its series judges the canary.

    A failure reads as that gate's own reason, so the verdict lists it once.
    """
    gates = sorted(checks.absolute_gates(check), key=lambda name: checks.checks[name].limit)
    if not gates:  # a check list the loader did not validate: still no pass without a comparison
        reason = f"{GATE_NAME['relative']}: the baseline has no {check.label} and no absolute gate covers it"
        return _unless(line, True, "inconclusive", reason)
    gate = checks.checks[gates[0]]
    judged = line.model_copy(update={"gate": "absolute", "limit": gate.limit, "judged_by": gates[0]})
    return _over_maximum(judged, gate, c, canary, gate.limit)


def analyse(canary: VariantStats, baseline: VariantStats, checks: CanaryChecks) -> Analysis:
    """Compare the canary with the baseline under ``checks`` (a rollout's overrides already applied).

    Examples
    --------
    >>> from fleetops.rollout.checks import load_canary_checks
    >>> from fleetops.rollout.thresholds import Thresholds
    >>> checks = load_canary_checks().with_overrides(Thresholds(min_requests=10))
    >>> def stats(name, requests, errors, ttft=300.0):
    ...     values = {"Requests:Sum": requests, "RequestErrors:Sum": errors, "TimeToFirstTokenMs:p95": ttft}
    ...     return VariantStats(variant_name=name, values=values | {"RequestLatencyMs:p95": 900.0})
    >>> analyse(stats("c", 5, 0), stats("p", 500, 0), checks).verdict
    'inconclusive'
    >>> for reason in analyse(stats("c", 100, 9), stats("p", 900, 9), checks).reasons:
    ...     print(reason)
    absolute SLO: error rate 9.00% above 0.50%
    relative to baseline: error rate 9.00% vs baseline 1.00% (max increase 0.10%)
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
