"""The MinCapacity timeline from a variant's own history: forecast demand per slot, raised by calendar events at
their learned (or configured) size, turned into instances and held from ``lead_time_minutes`` before each slot that
needs them until ``scale_in_delay_minutes`` after.

Pure: the history comes in as a :class:`~fleetops.prescale.forecast.DemandSeries`; the reconciler reads it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetops.calendar import Occurrence
from fleetops.config import PrescaleSettings, VariantConfig
from fleetops.prescale import event_sizes
from fleetops.prescale.event_sizes import EventSize, Profile
from fleetops.prescale.forecast import (
    SLOT,
    SLOT_S,
    DemandSeries,
    corrected,
    everyday,
    floor_slot,
    forecast,
    level_ratio,
    recent_slots,
    time_of_day_ratios,
    weekly_growth,
)
from fleetops.prescale.models import ForecastSummary, OverCap, Step


@dataclass(frozen=True)
class HistoryPlan:
    current: int
    uncorrected: int  # the level in force now without today's level (what MinCapacity holds if the plan set it)
    steps: list[Step]
    summary: ForecastSummary
    sizes: list[EventSize]
    over_cap: list[OverCap]


def _need(variant: VariantConfig, rps: float) -> int:
    # round() first so that float noise (10 * 1.2 = 12.000000000000002) does not add an instance.
    return math.ceil(round(rps * variant.headroom_over_forecast / variant.capacity_rps_per_instance, 9))


@dataclass(frozen=True)
class _Sized:
    occurrence: Occurrence
    size: EventSize
    profile: Profile | None

    def multiplier(self, slot: datetime) -> float:
        occ = self.occurrence
        if self.profile is not None:
            return self.profile.multiplier(occ, slot)
        return occ.multiplier if slot < occ.end and slot + SLOT > occ.start else 1.0

    def label(self) -> str:
        size = self.size.learned if self.size.used == "learned" else self.size.configured
        return f"{self.occurrence.reason} ({self.size.used} x{size:g})"


def _learn_sizes(
    events: Sequence[Occurrence], history: DemandSeries, usual: DemandSeries, settings: PrescaleSettings
) -> dict[str, tuple[EventSize, Profile | None]]:
    by_name: dict[str, list[Occurrence]] = {}
    for occ in events:
        by_name.setdefault(occ.name, []).append(occ)
    learned = {}
    for name, found in by_name.items():
        past = [o for o in found if o.end + event_sizes.LATE <= history.end]
        first = found[0]
        learned[name] = event_sizes.learn(
            name, first.kind, first.multiplier, past, history, usual, settings.min_event_occurrences
        )
    return learned


def _over_cap(variant: VariantConfig, slots: list[datetime], demand: list[float], needs: list[int]) -> list[OverCap]:
    found: list[OverCap] = []
    for slot, rps, need in zip(slots, demand, needs, strict=True):
        at_risk = round((rps - variant.cap * variant.capacity_rps_per_instance) * SLOT_S)
        if need <= variant.cap or at_risk <= 0:  # within the cap, or only the headroom is short: nothing fails
            continue
        last = found[-1] if found else None
        if last is not None and last.end == slot:
            found[-1] = last.model_copy(
                update={
                    "end": slot + SLOT,
                    "peak_instances": max(last.peak_instances, need),
                    "requests_at_risk": last.requests_at_risk + at_risk,
                }
            )
        else:
            found.append(
                OverCap(start=slot, end=slot + SLOT, peak_instances=need, cap=variant.cap, requests_at_risk=at_risk)
            )
    return found


def _window_max(values: Sequence[int], before: int, after: int) -> list[int]:
    """For each i, the index of the first largest value in ``values[i - before : i + after + 1]`` (a sliding
    window maximum, linear in the length).

    Examples
    --------
    >>> _window_max([1, 3, 2, 2, 5, 1], before=1, after=1)
    [1, 1, 1, 4, 4, 4]
    """
    found: list[int] = []
    window: deque[int] = deque()  # indices whose values decrease; equal values keep the earlier one first
    added = 0
    for i in range(len(values)):
        while added <= min(len(values) - 1, i + after):
            while window and values[window[-1]] < values[added]:
                window.pop()
            window.append(added)
            added += 1
        while window[0] < i - before:
            window.popleft()
        found.append(window[0])
    return found


def _demand(
    everyday_rps: Sequence[float],
    lift: Sequence[float],
    cuts: Sequence[float],
    ratio: float,
    slots: Sequence[datetime],
    now: datetime,
) -> list[float]:
    """Each slot's demand to plan for.

    Today's level above the forecast (``ratio`` > 1) sizes up the events (their learned size is over the everyday
    level); below it, it lowers the everyday slots, and so does a time of day that ran below its forecast on each of
    its last days (``cuts``). Events keep the size they were learned at; everyday traffic above the forecast is
    target tracking's.
    """
    demand = []
    for rps, up, cut, slot in zip(everyday_rps, lift, cuts, slots, strict=True):
        if up > 1.0:
            demand.append(corrected(rps * up, ratio, slot, now) if ratio > 1.0 else rps * up)
        else:
            demand.append(min(corrected(rps, min(ratio, 1.0), slot, now), rps * cut))
    return demand


def plan_from_history(
    variant: VariantConfig,
    occurrences: Sequence[Occurrence],
    settings: PrescaleSettings,
    now: datetime,
    history: DemandSeries,
) -> HistoryPlan:
    """The MinCapacity in force at ``now`` and each change of it within the horizon, from ``history``.

    ``occurrences`` are the endpoint's calendar occurrences from the start of the history to past the horizon;
    off-peak windows among them are ignored (the history shows the quiet hours). The caller has checked that
    the history is long enough (:attr:`PrescaleSettings.min_history_days`).
    """
    events = [o for o in occurrences if o.raises]
    event_spans = [(o.start - event_sizes.EARLY, o.end + event_sizes.LATE) for o in events]
    usual = everyday(history, event_spans)
    growth = weekly_growth(usual)
    recent = recent_slots(now, event_spans)
    zone = variant.traffic_zone
    ratio = level_ratio(history, recent, forecast(usual, now, recent, growth, zone))
    learned = _learn_sizes(events, history, usual, settings)
    lead = timedelta(minutes=settings.lead_time_minutes)
    delay = timedelta(minutes=settings.scale_in_delay_minutes)
    first = floor_slot(now)
    horizon_end = now + timedelta(hours=settings.planning_horizon_hours)
    span_start, span_end = floor_slot(first - delay), horizon_end + lead + SLOT
    slots = [span_start + i * SLOT for i in range(int((span_end - span_start) / SLOT))]
    everyday_rps = [v if v is not None else variant.baseline_rps for v in forecast(usual, now, slots, growth, zone)]
    sized = [
        _Sized(o, *learned[o.name])
        for o in events
        if o.end + event_sizes.LATE > span_start and o.start - event_sizes.EARLY < span_end
    ]
    lift = [1.0] * len(slots)
    for event in sized:  # each event touches only the slots of its (widened) window
        low = max(0, int((event.occurrence.start - event_sizes.EARLY - span_start) / SLOT))
        high = min(len(slots), math.ceil((event.occurrence.end + event_sizes.LATE - span_start) / SLOT) + 1)
        for i in range(low, high):
            lift[i] = max(lift[i], event.multiplier(slots[i]))
    cuts = time_of_day_ratios(usual, now, slots, growth, zone, event_spans)
    demand = _demand(everyday_rps, lift, cuts, ratio, slots, now)
    needs = [_need(variant, rps) for rps in demand]
    before, after = math.ceil(delay / SLOT), math.ceil(lead / SLOT)  # held at least as long as configured
    # The level of slot i is the largest need from ``delay`` before it to ``lead`` after it, and the slot that
    # decides it (the first such slot, for the step's reason).
    deciding = _window_max(needs, before, after)

    def level(i: int) -> int:
        return max(variant.floor, min(variant.cap, needs[deciding[i]]))

    def reason(top: int) -> str:
        active = [s.label() for s in sized if s.multiplier(slots[top]) > 1.0]
        at = f"forecast {demand[top]:.1f} req/s at {slots[top]:%a %H:%M} UTC"
        if lift[top] <= 1.0 and cuts[top] < 1.0:
            at += f" (this time of day x{cuts[top]:.2f} on its last days)"
        return "; ".join([at, *active])

    start_i = slots.index(first)
    current = level(start_i)
    # The same level without today's level: MinCapacity holds it now if this plan's earlier runs set it.
    plain = [
        _need(variant, rps * up if up > 1.0 else rps * cut)
        for rps, up, cut in zip(everyday_rps[: start_i + after + 1], lift, cuts, strict=False)
    ]
    uncorrected = max(variant.floor, min(variant.cap, max(plain[max(0, start_i - before) :])))
    steps: list[Step] = []
    previous = current
    for i in range(start_i + 1, len(slots)):
        if slots[i] > horizon_end:
            break
        value = level(i)
        if value != previous:
            steps.append(Step(at=slots[i], min_capacity=value, timezone="UTC", reason=reason(deciding[i])))
            previous = value
    horizon = [i for i, s in enumerate(slots) if first <= s < horizon_end]
    summary = ForecastSummary(
        source="history",
        why=f"forecast from {history.days_recorded():.1f} days of the variant's own Invocations",
        history_days=round(history.days_recorded(), 1),
        weekly_growth=round(growth, 3),
        level_ratio=round(ratio, 3),
        configured_baseline_rps=variant.baseline_rps,
        forecast_low_rps=round(min(everyday_rps[i] for i in horizon), 2),
        forecast_peak_rps=round(max(everyday_rps[i] for i in horizon), 2),
    )
    over = _over_cap(variant, [slots[i] for i in horizon], [demand[i] for i in horizon], [needs[i] for i in horizon])
    sizes = sorted((size for size, _ in learned.values()), key=lambda s: s.name)
    return HistoryPlan(
        current=current, uncorrected=uncorrected, steps=steps, summary=summary, sizes=sizes, over_cap=over
    )
