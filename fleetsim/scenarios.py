"""Traffic the policy did not plan from: weeks of per-minute arrivals from an invented world, to judge it on.

:func:`fleetsim.traffic.generate` draws a day from the calendar itself (plateaus at ``baseline_rps``, each
event at its entry's own time and multiplier), so a policy that plans from the same calendar is right by
construction. A :class:`Scenario` describes the world instead, and the calendar only says when the world was
told something would happen:

- a daily profile of smooth humps over a night floor (lunch and evening in the scenario's own time zone),
  later and busier on weekends, and a growth trend from week to week;
- a level of ``baseline_factor`` x the variant's ``baseline_rps`` at the start of the judged week;
- calendar events at their entries' occurrences, but with the size, timing and presence the scenario gives
  (:class:`EventTruth`): an event peaks at ``size`` x its entry's multiplier x the level, may start rising
  before the entry's start, or may bring nothing at all; in history weeks each occurrence's size varies by up
  to ``size_noise`` either side, so a policy cannot memorise last week's number;
- unannounced spikes (:class:`fleetsim.traffic.Spike`) in the judged week, in no calendar.

An event or spike raises the traffic towards its peak and never lowers it: where the day's own hump is
already higher, the event adds nothing (the calendar's multiplier is traffic relative to the baseline, not an
increment). Off-peak (and daily) entries bring nothing either: the night is the profile's floor and the day
its humps, whatever the calendar says. Per-minute noise is log-normal and arrivals Poisson, all from one seeded
generator, so a scenario always gives the same trace.

This module is the world, not the policy: it reads the calendar's occurrence times and multipliers only, never
``fleetops.prescale``, a variant's ``headroom`` or the lead time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import numpy as np

from fleetops.calendar import CalendarEntry
from fleetops.config import VariantConfig
from fleetsim.traffic import TICK, TICK_S, Spike, Trace, Window

if TYPE_CHECKING:
    from fleetsim.simulate import Setup

JST = ZoneInfo("Asia/Tokyo")
WEEK = timedelta(days=7)
#: Monday 00:00 JST three weeks before the judged week, Monday 2026-11-30 (the release week the bench has
#: always judged), so a 4-week scenario's last week is that week.
HISTORY_START = datetime(2026, 11, 9, tzinfo=JST)
MINUTES_PER_DAY = 24 * 60
#: Entry kinds that describe the day rather than an event: the world's day is its own profile.
DAY_SHAPES = ("off_peak", "daily")

#: Share of an event's window (after its ramp) held at the peak before it decays: readers come for the drop,
#: then trickle away; the decay is down to e^-1.5 (22 %) at the entry's end and runs on after it.
EVENT_HOLD = 0.6
DECAY_AT_END = 1.5
#: A spike arrives as fast as a drop (a post goes viral, a link is shared) and, unlike a drop, holds.
SPIKE_RAMP_MINUTES = 2
SPIKE_HOLD = 0.8


@dataclass(frozen=True)
class Hump:
    """A daily peak: ``height`` over the night floor at ``hour`` (local, 0-24), a Gaussian of ``width_hours``."""

    hour: float
    height: float
    width_hours: float


#: Lunch and after dinner: about 0.4x the day's mean from 04:00 to 08:00, 1.6x at 12:30, 2x at 21:30.
TWO_HUMPS = (Hump(12.5, 2.9, 1.5), Hump(21.5, 4.0, 2.5))
US_HUMPS = (Hump(12.0, 2.5, 1.5), Hump(20.0, 4.0, 2.5))


@dataclass(frozen=True)
class EventTruth:
    """What an announced entry really brings (by the entry's name); entries not named bring what they say."""

    entry: str
    size: float = 1.0  # the true peak over the entry's multiplier (1.3: 30 % above)
    early_minutes: int = 0  # traffic starts rising this long before the entry's start
    absent: bool = False  # the entry brings no traffic at all

    def __post_init__(self) -> None:
        if self.size <= 0 or self.early_minutes < 0:
            raise ValueError(f"{self.entry}: size must be positive and early_minutes not negative")


@dataclass(frozen=True)
class Scenario:
    """A world of ``weeks`` weeks from ``start``; the last week is judged, the ones before are its history."""

    name: str
    description: str
    seed: int
    weeks: int = 4
    start: datetime = HISTORY_START
    baseline_factor: float = 1.0  # the level at the judged week's start, over the variant's baseline_rps
    zone: str = "Asia/Tokyo"  # where the humps and the weekend are
    humps: tuple[Hump, ...] = TWO_HUMPS
    night_floor: float = 1.0  # the profile's floor, in the humps' units (the profile is scaled to mean 1)
    weekend_factor: float = 1.2  # Saturday and Sunday over a weekday
    weekend_shift_hours: float = 1.5  # the humps come later on weekends (people sleep in)
    growth_per_week: float = 0.05
    noise: float = 0.08  # per-minute log-normal sigma
    events: tuple[EventTruth, ...] = ()
    size_noise: float = 0.10  # each history occurrence's size varies by up to this either side
    ramp_minutes: int = 5  # an event's rise from its arrival to its peak: readers wait for a drop and refresh
    spikes: tuple[Spike, ...] = ()  # in the judged week
    cap: int | None = None  # the operator's cap for an endpoint this busy, where fleet.yaml's would not do
    # Days of the judged week (0 = Monday, in ``zone``) whose everyday traffic runs at a share of the usual: a
    # public holiday, an outage upstream. Events still come at their size.
    quiet_days: tuple[tuple[int, float], ...] = ()
    level_walk: float = 0.0  # hourly log-sigma of a level that wanders in every week (AR(1), 0.85 an hour)
    # (days from the judged week's start, factor): from then on the whole level, events included, runs at factor
    # times what it was (a campaign, a new market); negative days put the step in the history.
    level_step: tuple[float, float] | None = None
    # (days from the judged week's start, hours): from then on the day's humps come that many hours later (a new
    # release time, an audience in another zone); negative days put the change in the history.
    humps_moved: tuple[float, float] | None = None
    # What one instance really serves, over fleet.yaml's capacity_rps_per_instance: below 1 a model with longer
    # answers (each request that much longer in the container), above 1 one that was measured too cautiously.
    capacity_factor: float = 1.0

    def __post_init__(self) -> None:
        if self.weeks < 2:
            raise ValueError(f"{self.name}: needs at least one week of history before the judged one")
        if self.start.tzinfo is None:
            raise ValueError(f"{self.name}: start must be timezone-aware")
        if self.baseline_factor <= 0 or not 0 <= self.size_noise < 1 or self.ramp_minutes <= 0:
            raise ValueError(f"{self.name}: baseline_factor and ramp_minutes must be positive, size_noise in [0, 1)")
        ZoneInfo(self.zone)  # an unknown zone fails here, not in the middle of a bench
        if any(not 0 <= day <= 6 or share <= 0 for day, share in self.quiet_days) or self.level_walk < 0:
            raise ValueError(f"{self.name}: quiet_days are (0-6, share > 0), level_walk at least 0")
        if self.level_step is not None and self.level_step[1] <= 0:
            raise ValueError(f"{self.name}: level_step's factor must be positive")
        if self.capacity_factor <= 0:
            raise ValueError(f"{self.name}: capacity_factor must be positive")
        for spike in self.spikes:
            if not self.judged_from <= spike.start < self.end:
                raise ValueError(f"{self.name}: spike at {spike.start.isoformat()} is not in the judged week")

    @property
    def judged_from(self) -> datetime:
        """The start of the last week, the one judged (UTC)."""
        return self.start.astimezone(UTC) + (self.weeks - 1) * WEEK

    @property
    def end(self) -> datetime:
        return self.start.astimezone(UTC) + self.weeks * WEEK

    def truth(self, entry: str) -> EventTruth:
        return next((t for t in self.events if t.entry == entry), EventTruth(entry))


@dataclass(frozen=True)
class _Event:
    name: str
    arrival: datetime  # traffic starts rising
    start: datetime  # the entry's start and end, as the calendar states them
    end: datetime
    multiplier: float  # the entry's
    peak: float  # the true peak over the level; 0 when the entry brings nothing


def daily_profile(scenario: Scenario, *, weekend: bool = False, later_hours: float = 0.0) -> np.ndarray:
    """One local day's shape, minute by minute, scaled to mean 1 (before the weekend factor)."""
    hours = np.arange(MINUTES_PER_DAY) / 60
    shift = (scenario.weekend_shift_hours if weekend else 0.0) + later_hours
    shape = np.full(MINUTES_PER_DAY, scenario.night_floor)
    for hump in scenario.humps:
        distance = (hours - hump.hour - shift + 12) % 24 - 12  # around midnight: 23:00 is an hour from 00:00
        shape += hump.height * np.exp(-0.5 * (distance / hump.width_hours) ** 2)
    profile: np.ndarray = shape / shape.mean()
    return profile


def _level(scenario: Scenario, variant: VariantConfig, ticks: int) -> tuple[np.ndarray, np.ndarray]:
    """Requests/s without events, and the reference level events are sized against (the trend alone)."""
    zone = ZoneInfo(scenario.zone)
    start = scenario.start.astimezone(UTC)
    moved_from, later = scenario.humps_moved or (math.inf, 0.0)
    profiles = {
        (moved, weekend): daily_profile(scenario, weekend=weekend, later_hours=later if moved else 0.0)
        for moved in (False, True)
        for weekend in (False, True)
    }
    judged_day = scenario.judged_from.astimezone(zone).date()
    quiet = dict(scenario.quiet_days)
    shape = np.empty(ticks)
    for tick in range(ticks):
        at = start + tick * TICK
        local = at.astimezone(zone)  # the zone's own clock, daylight saving included
        minute = local.hour * 60 + local.minute
        moved = (at - scenario.judged_from) / timedelta(days=1) >= moved_from
        profile = profiles[moved, local.weekday() >= 5]
        shape[tick] = profile[minute] * (scenario.weekend_factor if local.weekday() >= 5 else 1.0)
        shape[tick] *= quiet.get((local.date() - judged_day).days, 1.0)
    if scenario.level_walk > 0:  # its own generator: the other scenarios' draws stay as they were
        steps = np.random.default_rng([scenario.seed, 1]).normal(0.0, scenario.level_walk, ticks // 60 + 1)
        walk = np.zeros_like(steps)
        for hour in range(1, len(steps)):
            walk[hour] = 0.85 * walk[hour - 1] + steps[hour]
        shape *= np.exp(walk[np.arange(ticks) // 60])
    weeks_from_judged = (
        np.arange(ticks) * TICK_S - (scenario.judged_from - start).total_seconds()
    ) / WEEK.total_seconds()
    reference = variant.baseline_rps * scenario.baseline_factor * (1 + scenario.growth_per_week) ** weeks_from_judged
    if scenario.level_step is not None:
        days, factor = scenario.level_step
        reference = np.where(weeks_from_judged * 7 >= days, reference * factor, reference)
    return reference * shape, reference


def _events(
    scenario: Scenario, entries: Sequence[CalendarEntry], endpoint: str, rng: np.random.Generator
) -> list[_Event]:
    """The calendar's events (multiplier >= 1) over the scenario, as the world plays them."""
    found = sorted(
        (
            occ
            for entry in entries
            for occ in entry.occurrences(scenario.start - timedelta(days=1), scenario.end)
            if occ.applies_to(endpoint) and occ.multiplier >= 1 and entry.kind not in DAY_SHAPES
        ),
        key=lambda occ: (occ.start, occ.name),
    )
    # One draw per occurrence, whether used or not, so one entry's truth never shifts another's noise.
    wobble = rng.uniform(-scenario.size_noise, scenario.size_noise, size=len(found))
    events = []
    for occ, noise in zip(found, wobble, strict=True):
        truth = scenario.truth(occ.name)
        size = truth.size * (1 + noise) if occ.start < scenario.judged_from else truth.size
        events.append(
            _Event(
                name=occ.name,
                arrival=occ.start - timedelta(minutes=truth.early_minutes),
                start=occ.start,
                end=occ.end,
                multiplier=occ.multiplier,
                peak=0.0 if truth.absent else occ.multiplier * size,
            )
        )
    return events


def _envelope(ticks: np.ndarray, rise: float, end: float, ramp: float, hold: float) -> np.ndarray:
    """0 before ``rise``, a half-cosine up to 1 over ``ramp``, held for ``hold`` of what is left before ``end``,
    then an exponential decay (e^-1.5 at ``end``) that runs on after it. Times in minutes from the start."""
    top = rise + ramp
    decay_from = top + hold * max(0.0, end - top)
    tau = max(1.0, (end - decay_from) / DECAY_AT_END)
    # A minute's level is the envelope at its end: traffic is already up in a spike's or an event's first minute.
    up = 0.5 - 0.5 * np.cos(np.pi * np.clip((ticks + 1 - rise) / ramp, 0.0, 1.0))
    down = np.exp(-np.clip(ticks - decay_from, 0.0, None) / tau)
    shaped: np.ndarray = np.where(ticks < rise, 0.0, np.minimum(up, down))
    return shaped


def _raise(rates: np.ndarray, reference: np.ndarray, peak: float, envelope: np.ndarray) -> None:
    """Lift ``rates`` towards ``peak`` x the reference level as far as ``envelope`` says; never lower it."""
    rates += envelope * np.maximum(0.0, peak * reference - rates)


def _minutes(scenario: Scenario, at: datetime) -> float:
    return (at - scenario.start).total_seconds() / TICK_S


def _expected(
    scenario: Scenario,
    variant: VariantConfig,
    entries: Sequence[CalendarEntry],
    endpoint: str,
    rng: np.random.Generator,
) -> tuple[np.ndarray, list[_Event]]:
    ticks = scenario.weeks * 7 * MINUTES_PER_DAY
    rates, reference = _level(scenario, variant, ticks)
    axis = np.arange(ticks, dtype=float)
    events = _events(scenario, entries, endpoint, rng)
    for event in events:
        if event.peak > 0:
            shape = _envelope(
                axis,
                _minutes(scenario, event.arrival),
                _minutes(scenario, event.end),
                scenario.ramp_minutes,
                EVENT_HOLD,
            )
            _raise(rates, reference, event.peak, shape)
    for spike in scenario.spikes:
        begin = _minutes(scenario, spike.start)
        _raise(
            rates,
            reference,
            spike.multiplier,
            _envelope(axis, begin, begin + spike.minutes, SPIKE_RAMP_MINUTES, SPIKE_HOLD),
        )
    return rates, events


def expected_rps(
    scenario: Scenario, variant: VariantConfig, entries: Sequence[CalendarEntry], endpoint: str
) -> np.ndarray:
    """The world's mean requests/s each minute, before noise: what :func:`generate` draws its arrivals around."""
    return _expected(scenario, variant, entries, endpoint, np.random.default_rng(scenario.seed))[0]


def generate(scenario: Scenario, variant: VariantConfig, entries: Sequence[CalendarEntry], endpoint: str) -> Trace:
    """The scenario's per-minute arrivals for ``endpoint``'s ``variant``, with the judged week's windows.

    Windows label what the judged week is judged on: each calendar event as its entry states it (predicted,
    multiplier the entry's), begun earlier where the traffic arrived early so that what arriving early cost
    is counted on the event; an absent event keeps its window (capacity raised for nothing is its cost); and
    each unannounced spike (not predicted).
    """
    rng = np.random.default_rng(scenario.seed)
    rates, events = _expected(scenario, variant, entries, endpoint, rng)
    sigma = scenario.noise
    jitter = rng.lognormal(mean=-(sigma**2) / 2, sigma=sigma, size=len(rates)) if sigma > 0 else 1.0
    requests = rng.poisson(rates * TICK_S * jitter)
    judged, end = scenario.judged_from, scenario.end
    windows = [
        Window(e.name, min(e.arrival, e.start), e.end, e.multiplier, predicted=True)
        for e in events
        if min(e.arrival, e.start) < end and e.end > judged
    ]
    windows += [
        Window(
            s.name, s.start.astimezone(UTC), s.start.astimezone(UTC) + timedelta(minutes=s.minutes), s.multiplier, False
        )
        for s in scenario.spikes
    ]
    return Trace(
        scenario.start.astimezone(UTC), tuple(int(r) for r in requests), tuple(sorted(windows, key=lambda w: w.start))
    )


def _judged_day(day: int, hour: int) -> datetime:
    """``hour``:00 JST on day ``day`` (0: Monday) of the judged week of a scenario starting at HISTORY_START."""
    return HISTORY_START + 3 * WEEK + timedelta(days=day, hours=hour)


#: The shipped calendar's entries, each within 10 % of what it says (the world is never exactly the calendar).
SHIPPED = (
    EventTruth("shonen-jump-monday", size=0.93),
    EventTruth("friday-simulpub", size=1.08),
    EventTruth("us-saturday-manga-club", size=0.95),
)


def _with(truth: EventTruth) -> tuple[EventTruth, ...]:
    return (*(t for t in SHIPPED if t.entry != truth.entry), truth)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "baseline-0.5x",
        "half the configured baseline, two humps a day in Tokyo, +5 %/week, the shipped events within 10 %",
        seed=11,
        baseline_factor=0.5,
        events=SHIPPED,
    ),
    Scenario(
        "baseline-1x",
        "the configured baseline, two humps a day in Tokyo, +5 %/week, the shipped events within 10 %",
        seed=12,
        events=SHIPPED,
    ),
    Scenario(
        "baseline-2x",
        "twice the configured baseline, two humps a day in Tokyo, +5 %/week, the shipped events within 10 %",
        seed=13,
        baseline_factor=2.0,
        events=SHIPPED,
        cap=30,  # fleet.yaml's 12 is 8 short of what the oracle needs at the peak: a cap is a budget, not a forecast
    ),
    Scenario(
        "us-pacific-1x",
        "the configured baseline with the day's humps in US Pacific time (JST calendar), +5 %/week",
        seed=14,
        zone="America/Los_Angeles",
        humps=US_HUMPS,
        events=SHIPPED,
    ),
    Scenario(
        "event-early-30pct",
        "the Friday simulpub 30 % above its entry and rising 10 minutes before it, every week",
        seed=15,
        events=_with(EventTruth("friday-simulpub", size=1.3, early_minutes=10)),
    ),
    Scenario(
        "event-small-30pct",
        "the Friday simulpub 30 % below its entry, traffic shrinking 5 %/week",
        seed=18,
        growth_per_week=-0.05,
        events=_with(EventTruth("friday-simulpub", size=0.7)),
    ),
    Scenario(
        "entry-brings-nothing",
        "the Monday Shonen Jump entry brings no extra traffic, in any week",
        seed=16,
        events=_with(EventTruth("shonen-jump-monday", absent=True)),
    ),
    Scenario(
        "unannounced-3x",
        "3x spikes in no calendar: 80 minutes on the judged Wednesday at 16:00 JST, 60 on Tuesday at 04:00 (the "
        "night's trough) and 90 on Thursday at 21:00 (the evening hump)",
        seed=17,
        events=SHIPPED,
        spikes=(
            Spike(_judged_day(1, 4), minutes=60, multiplier=3.0, name="unannounced 3x at night"),
            Spike(_judged_day(2, 16), minutes=80, multiplier=3.0, name="unannounced 3x"),
            Spike(_judged_day(3, 21), minutes=90, multiplier=3.0, name="unannounced 3x in the evening"),
        ),
    ),
)


def setup_for(world: Scenario, setup: Setup) -> Setup:
    """``setup`` as the scenario's operator would set it: the variant's ``traffic_timezone`` where its users'
    clocks change for daylight saving (elsewhere the default, UTC, compares the same hours and costs less to
    simulate), and its cap where the scenario has one (the policy's own settings are untouched); and the world's
    instances, which serve ``capacity_factor`` times what fleet.yaml says (the operator does not know)."""
    variant: dict[str, Any] = {}
    zone = ZoneInfo(world.zone)
    if any(zone.dst(datetime(world.start.year, month, 1)) for month in (1, 7)):
        variant["traffic_timezone"] = world.zone
    if world.cap is not None:
        variant["cap"] = world.cap
    tuned = setup.tuned(variant=variant)
    if world.capacity_factor == 1.0:
        return tuned
    params = replace(
        tuned.params,
        capacity_rps_per_instance=tuned.variant.capacity_rps_per_instance * world.capacity_factor,
        request_seconds=tuned.params.request_seconds / world.capacity_factor,
    )
    return replace(tuned, params=params)


def scenario(name: str) -> Scenario:
    """The scenario of :data:`SCENARIOS` called ``name``.

    Raises
    ------
    KeyError
        For a name not in :data:`SCENARIOS`; the message lists them.
    """
    found = next((s for s in SCENARIOS if s.name == name), None)
    if found is None:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(s.name for s in SCENARIOS)}")
    return found
