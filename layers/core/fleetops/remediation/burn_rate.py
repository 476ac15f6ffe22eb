"""SLO burn-rate alarms: which alarms the SLOs of ``playbook.yaml`` call for, and at which thresholds.

An availability SLO of 99.9 % over 30 days leaves an error budget of 0.1 % of requests. A burn rate of 14.4
spends it 14.4 times as fast as the SLO allows (2 % of the month's budget in one hour), which a window shows
as an error rate above 14.4 x 0.1 = 1.44 %. Each tier watches a long and a short window and fires only while
both burn (Google SRE workbook, "Alerting on SLOs": multiwindow, multi-burn-rate alerts): the long window
proves the burn is real, the short one that it is still going on, so the alert resets minutes after a fix.

Latency SLOs count slow requests the same way: "95 % of first tokens within 500 ms" has a budget of 5 % of
requests slower than 500 ms, read from CloudWatch's percentile-rank statistic (``PR(:500)``: the percentage of
samples at or below 500). The templates declare the alarms; ``tests/unit/test_slo_alarms.py`` holds them to
:func:`burn_rate_alarms`, the one place where their thresholds are computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from fleetops.metrics import MetricName

if TYPE_CHECKING:
    from fleetops.remediation.models import BurnRateTier, ServiceLevels


class BurnRateError(ValueError):
    """A tier that no window could ever show (its burn would need more than 100 % bad requests)."""


@dataclass(frozen=True)
class Objective:
    """One SLO as a share of bad requests: ``budget_percent`` of them may be bad over the SLO's period."""

    name: str  # part of the alarm names: availability, ttft, latency
    metric: MetricName
    budget_percent: float
    divided_by: MetricName | None = None  # a ratio SLI: 100 * metric / divided_by is the bad percentage
    good_within_ms: float | None = None  # a latency SLI: a request is good at or below this


def objectives(slo: ServiceLevels) -> tuple[Objective, ...]:
    """The SLOs that get burn-rate alarms, from the playbook's ``slo`` (TTFT p50 is a median: no budget to burn)."""
    return (
        Objective(
            "availability",
            MetricName.REQUEST_ERRORS,
            round(100 - slo.availability_percent, 6),
            divided_by=MetricName.REQUESTS,
        ),
        Objective("ttft", MetricName.TIME_TO_FIRST_TOKEN, 5.0, good_within_ms=slo.ttft_p95_ms),
        Objective("latency", MetricName.REQUEST_LATENCY, 1.0, good_within_ms=slo.latency_p99_ms),
    )


def bad_percent_threshold(budget_percent: float, burn_rate: float) -> float:
    """The share of bad requests (percent) at which a window burns the budget ``burn_rate`` times too fast.

    Raises
    ------
    BurnRateError
        When that share is 100 % or more: no window could ever alarm.

    Examples
    --------
    >>> bad_percent_threshold(0.1, 14.4), bad_percent_threshold(0.1, 6), bad_percent_threshold(5, 14.4)
    (1.44, 0.6, 72.0)
    >>> bad_percent_threshold(50, 6)
    Traceback (most recent call last):
    ...
    fleetops.remediation.burn_rate.BurnRateError: a 6x burn of a 50 % budget needs 300 % bad requests: ...
    """
    threshold = round(budget_percent * burn_rate, 6)  # 0.1 * 14.4 is 1.4400000000000002 in binary
    if threshold >= 100:
        raise BurnRateError(
            f"a {burn_rate:g}x burn of a {budget_percent:g} % budget needs {threshold:g} % bad requests: "
            "no window can show it; lower the burn rate or the objective"
        )
    return threshold


def window_label(minutes: int) -> str:
    """``5m``, ``1h``, ``3d``: the window as the alarm names spell it.

    Examples
    --------
    >>> window_label(5), window_label(60), window_label(360), window_label(4320), window_label(90)
    ('5m', '1h', '6h', '3d', '90m')
    """
    if minutes % 1440 == 0:
        return f"{minutes // 1440}d"
    if minutes % 60 == 0:
        return f"{minutes // 60}h"
    return f"{minutes}m"


Comparison = Literal["GreaterThanThreshold", "LessThanThreshold"]


@dataclass(frozen=True)
class WindowAlarm:
    """One window of a tier: a metric alarm with one evaluation period as long as the window."""

    objective: Objective
    tier: str
    window_minutes: int
    bad_percent: float  # the threshold as a share of bad requests

    @property
    def name(self) -> str:
        """``<objective>-<tier>-burn-<window>``, between the SLO alarm prefix and ``-<endpoint>-<variant>``."""
        return f"{self.objective.name}-{self.tier}-burn-{window_label(self.window_minutes)}"

    @property
    def period_seconds(self) -> int:
        return self.window_minutes * 60

    @property
    def statistic(self) -> str:
        """``Sum`` of a ratio's two counts, or the percentile rank of good requests (``PR(:500)``)."""
        good = self.objective.good_within_ms
        return "Sum" if good is None else f"PR(:{good:g})"

    @property
    def comparison(self) -> Comparison:
        return "GreaterThanThreshold" if self.objective.good_within_ms is None else "LessThanThreshold"

    @property
    def threshold(self) -> float:
        """Bad percentage for a ratio; good percentage (100 - bad) for a percentile rank."""
        return self.bad_percent if self.objective.good_within_ms is None else round(100 - self.bad_percent, 6)


@dataclass(frozen=True)
class BurnRateAlarm:
    """A tier of one objective: a composite alarm, ALARM while both its window alarms are."""

    objective: Objective
    tier: BurnRateTier
    long: WindowAlarm
    short: WindowAlarm

    @property
    def name(self) -> str:
        return f"{self.objective.name}-{self.tier.name}-burn"


def burn_rate_alarms(slo: ServiceLevels) -> list[BurnRateAlarm]:
    """Every objective's burn-rate tiers, with their windows' thresholds.

    Examples
    --------
    >>> from pathlib import Path
    >>> import fleetops
    >>> from fleetops.remediation.models import load_playbook
    >>> slo = load_playbook(Path(fleetops.__file__).parents[1] / "fleet_config" / "playbook.yaml").slo
    >>> [(a.name, a.tier.action, a.long.name, a.long.threshold) for a in burn_rate_alarms(slo)][:2]
    [('availability-fast-burn', 'page', 'availability-fast-burn-1h', 1.44), \
('availability-slow-burn', 'notify', 'availability-slow-burn-6h', 0.6)]
    """
    found = []
    for objective in objectives(slo):
        for tier in slo.burn_rate_tiers:
            try:
                bad = bad_percent_threshold(objective.budget_percent, tier.burn_rate)
            except BurnRateError as exc:
                raise BurnRateError(f"slo {objective.name}, burn-rate tier {tier.name!r}: {exc}") from exc
            long, short = (
                WindowAlarm(objective, tier.name, m, bad) for m in (tier.long_window_minutes, tier.short_window_minutes)
            )
            found.append(BurnRateAlarm(objective, tier, long, short))
    return found
