"""Pure planning: calendar occurrences -> a MinCapacity timeline -> scheduled actions -> the diff to apply.

Nothing here talks to AWS; every function is deterministic in its inputs, "now" included.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from fleetops.calendar import Occurrence
from fleetops.capacity import ScheduledAction, at_schedule, instances_for
from fleetops.config import PrescaleSettings, VariantConfig
from fleetops.prescale import event_sizes
from fleetops.prescale.forecast import SLOT, DemandSeries, floor_slot, level_ratio, recent_slots
from fleetops.prescale.models import ACTION_PREFIX, Change, Step

#: How far ahead a correction by today's level is followed slot by slot (it has faded to nothing by then).
TODAY_AHEAD = timedelta(hours=24)
#: Merging steps for the quota counts the instance-hours a merge adds within ``PRECISE_AHEAD`` of now in full and
#: those after it at ``FAR_WEIGHT``. The reconciler plans the whole horizon again on every run (every 15 minutes
#: by default), so a step days away is planned again many times before it comes, with the quota spent near it by
#: then; the far future is where a coarse plan costs nothing. A merge only ever raises: were the reconciler to
#: stop, the standing plan would still never hold less than the forecast.
PRECISE_AHEAD = timedelta(hours=24)
FAR_WEIGHT = 0.01


@dataclass(frozen=True)
class _Window:
    start: datetime
    end: datetime
    raises: bool  # events (multiplier >= 1) raise capacity; off-peak windows lower it
    occurrence: Occurrence


def _windows(occurrences: list[Occurrence], settings: PrescaleSettings) -> list[_Window]:
    lead = timedelta(minutes=settings.lead_time_minutes)
    delay = timedelta(minutes=settings.scale_in_delay_minutes)
    windows = []
    for occ in sorted(occurrences, key=lambda o: (o.start, o.name)):
        if occ.multiplier >= 1:
            windows.append(_Window(occ.start - lead, occ.end + delay, True, occ))
        else:  # lowering needs no lead time: capacity goes down when the quiet hours start
            windows.append(_Window(occ.start, occ.end, False, occ))
    return windows


def _level_at(t: datetime, windows: list[_Window], variant: VariantConfig, today: float) -> tuple[int, list[_Window]]:
    """The level at ``t``; ``today`` below 1 lowers the levels outside events, above 1 raises the events'."""
    active = [w for w in windows if w.start <= t < w.end]
    quieter, busier = min(today, 1.0), max(today, 1.0)
    lowers = [instances_for(variant, w.occurrence.multiplier * quieter) for w in active if not w.raises]
    base = min(lowers) if lowers else instances_for(variant, quieter)
    raises = [instances_for(variant, w.occurrence.multiplier * busier) for w in active if w.raises]
    return max([base, *raises]), active


def _reason(active: list[_Window], today: float) -> str:
    found = [f"{w.occurrence.reason} (x{w.occurrence.multiplier:g})" for w in active]
    if today != 1.0 and (today < 1.0 or any(w.raises for w in active)):
        found.append(f"today's level x{today:.2f}")
    return "; ".join(found) or "baseline"


def timeline(
    variant: VariantConfig,
    occurrences: list[Occurrence],
    settings: PrescaleSettings,
    now: datetime,
    today: Callable[[datetime], float] | None = None,
) -> tuple[int, list[Step]]:
    """The MinCapacity in force at ``now`` and every change of it within the planning horizon.

    Overlapping events take the larger capacity; off-peak windows lower the baseline but never an event.
    Each step is expressed in the time zone of the calendar entry whose edge caused it. ``today`` is today's
    level at each moment (fading with the hours ahead): below 1 it lowers the levels outside events, above 1 it
    raises the events'; the steps it causes fall on slots and are in UTC.
    """
    windows = _windows(occurrences, settings)
    scale = today or (lambda _: 1.0)
    horizon_end = now + timedelta(hours=settings.planning_horizon_hours)
    edges: dict[datetime, str] = {}
    for w in windows:
        for edge in (w.start, w.end):
            if now < edge <= horizon_end:
                edges.setdefault(edge, w.occurrence.timezone)
    if today is not None:  # the level may change between the calendar's edges as the correction fades
        first = floor_slot(now)
        for k in range(1, int(TODAY_AHEAD / SLOT) + 1):
            if (edge := first + k * SLOT) <= horizon_end:
                edges.setdefault(edge, "UTC")
    current, _ = _level_at(now, windows, variant, scale(now))
    steps: list[Step] = []
    previous = current
    for edge in sorted(edges):
        level, active = _level_at(edge, windows, variant, scale(edge))
        if level != previous:
            reason = _reason(active, scale(edge))
            steps.append(Step(at=edge, min_capacity=level, timezone=edges[edge], reason=reason))
            previous = level
    return current, steps


def configured_today(
    variant: VariantConfig, occurrences: Sequence[Occurrence], now: datetime, history: DemandSeries
) -> float:
    """Today's level against the configured one (``baseline_rps``, an off-peak window's multiplier where one is
    in force), from a history too short to forecast from; event windows (widened as in the forecast) left out.

    A new endpoint quieter than its configuration is planned at what it really serves for the hours ahead; one
    busier than it has its events ahead sized from what it serves (an entry's multiplier is over the baseline).
    """
    events = [(o.start - event_sizes.EARLY, o.end + event_sizes.LATE) for o in occurrences if o.raises]
    slots = recent_slots(now, events)
    expected = []
    for slot in slots:
        quiet = [o.multiplier for o in occurrences if not o.raises and o.start <= slot < o.end]
        expected.append(variant.baseline_rps * min(quiet, default=1.0))
    return level_ratio(history, slots, expected)


def _weighted_s(start: datetime, end: datetime, precise_until: datetime | None) -> float:
    """Seconds of ``[start, end)``, those after ``precise_until`` counted ``FAR_WEIGHT`` as much."""
    whole = (end - start).total_seconds()
    if precise_until is None:
        return whole
    near = min(whole, max(0.0, (precise_until - start).total_seconds()))
    return near + FAR_WEIGHT * (whole - near)


def within_quota(
    current: int, steps: list[Step], limit: int, horizon_end: datetime, *, precise_until: datetime | None = None
) -> tuple[list[Step], list[Step]]:
    """At most ``limit`` steps: merge the neighbouring steps whose merge costs the fewest instance-hours.

    Application Auto Scaling keeps at most 200 scheduled actions per scalable target (not adjustable). Merging
    two neighbouring stretches gives both the larger level, so a merge never lowers capacity below the plan; a
    stretch is never merged into the level in force now when that would raise it (that would be a change now,
    not a scheduled one). Returns the steps kept and those dropped.

    With ``precise_until`` (the reconciler's ``now + PRECISE_AHEAD``), instance-hours a merge adds after it count
    ``FAR_WEIGHT`` as much, so the steps further ahead are merged first.

    Examples
    --------
    >>> t = datetime(2026, 12, 4, tzinfo=UTC)
    >>> plan = [Step(at=t + timedelta(hours=h), min_capacity=n, timezone="UTC", reason="")
    ...         for h, n in ((1, 4), (2, 5), (3, 4), (10, 2))]
    >>> kept, dropped = within_quota(2, plan, 2, t + timedelta(hours=24))
    >>> [(s.at.hour, s.min_capacity) for s in kept], [(s.at.hour, s.min_capacity) for s in dropped]
    ([(1, 5), (10, 2)], [(2, 5), (3, 4)])
    """
    if len(steps) <= limit:
        return steps, []
    # Stretch 0 is the level in force now (never raised, so its length is left at 0); stretch i >= 1 runs from
    # steps[i - 1] to the next step or the horizon's end. A merge adds (top - level) x length for each of its two.
    origin: list[Step | None] = [None, *steps]
    levels = [current, *(step.min_capacity for step in steps)]
    bounds = [*(step.at for step in steps), horizon_end]
    lengths = [0.0, *(_weighted_s(start, end, precise_until) for start, end in itertools.pairwise(bounds))]
    dropped: list[Step] = []
    while len(levels) - 1 > limit:
        best: tuple[float, int] | None = None
        for j in range(len(levels) - 1):
            if j == 0 and levels[1] > levels[0]:
                continue
            top = max(levels[j], levels[j + 1])
            cost = (top - levels[j]) * lengths[j] + (top - levels[j + 1]) * lengths[j + 1]
            if best is None or cost < best[0]:
                best = (cost, j)
        if best is None:  # every remaining step rises from the level in force now: nothing can merge
            break
        j = best[1]
        levels[j] = max(levels[j], levels.pop(j + 1))
        lengths[j] += lengths.pop(j + 1)
        merged = origin.pop(j + 1)
        assert merged is not None
        dropped.append(merged)
    kept: list[Step] = []
    for step, level in zip(origin[1:], levels[1:], strict=True):
        assert step is not None
        if level == (kept[-1].min_capacity if kept else current):
            dropped.append(step)  # a merge left it at the level before it
            continue
        note = f"{step.reason} (merged to stay in quota)"
        kept.append(
            step if step.min_capacity == level else step.model_copy(update={"min_capacity": level, "reason": note})
        )
    return kept, sorted(dropped, key=lambda s: s.at)


def action_name(endpoint_name: str, variant_name: str, at: datetime) -> str:
    """Deterministic: the same step always gets the same name, so a second run changes nothing."""
    return f"{ACTION_PREFIX}{endpoint_name}-{variant_name}-{at.astimezone(UTC):%Y%m%dT%H%MZ}"


def scheduled_actions(endpoint_name: str, variant: VariantConfig, steps: list[Step]) -> list[ScheduledAction]:
    """One ``at(...)`` action per step, in local time of its zone, MaxCapacity at the variant's cap."""
    actions = []
    for step in steps:
        local = step.at.astimezone(ZoneInfo(step.timezone))
        actions.append(
            ScheduledAction(
                name=action_name(endpoint_name, variant.name, step.at),
                endpoint_name=endpoint_name,
                variant_name=variant.name,
                schedule=at_schedule(local),
                timezone=step.timezone,
                min_capacity=step.min_capacity,
                max_capacity=max(variant.cap, step.min_capacity),
            )
        )
    return actions


def diff(desired: list[ScheduledAction], actual: list[ScheduledAction], reasons: dict[str, str]) -> list[Change]:
    """Creates, updates and deletes that turn ``actual`` into ``desired`` (names decide identity)."""
    have = {a.name: a for a in actual}
    want = {a.name: a for a in desired}
    changes: list[Change] = []
    for name, action in sorted(want.items()):
        old = have.get(name)
        if old is None:
            changes.append(_change("create", action, None, action, reasons.get(name, "")))
        elif old != action:
            changes.append(_change("update", action, old, action, reasons.get(name, "")))
    for name, action in sorted(have.items()):
        if name not in want:
            changes.append(_change("delete", action, action, None, "no longer in the calendar or already past"))
    return changes


def _change(
    kind: str, ref: ScheduledAction, before: ScheduledAction | None, after: ScheduledAction | None, reason: str
) -> Change:
    return Change.model_validate(
        {
            "kind": kind,
            "endpoint_name": ref.endpoint_name,
            "variant_name": ref.variant_name,
            "name": ref.name,
            "reason": reason,
            "before": before,
            "after": after,
        }
    )
