"""Pure planning: timelines, action names, diffs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetops.calendar import Occurrence
from fleetops.capacity import ScheduledAction
from fleetops.config import PrescaleSettings, VariantConfig
from fleetops.prescale import planner
from fleetops.prescale.forecast import SLOT, DemandSeries

VARIANT = VariantConfig(name="primary", capacity_rps_per_instance=4, baseline_rps=12, headroom=1.25, floor=2, cap=10)
SETTINGS = PrescaleSettings(lead_time_minutes=120, scale_in_delay_minutes=15, planning_horizon_hours=48)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def occ(start: str, end: str, multiplier: float, name: str = "e", tz: str = "UTC") -> Occurrence:
    return Occurrence(
        name=name, start=utc(start), end=utc(end), multiplier=multiplier, reason=name, timezone=tz, endpoints=()
    )


def test_capacity_is_clamped_at_the_cap() -> None:
    current, steps = planner.timeline(
        VARIANT, [occ("2026-12-04T11:00", "2026-12-04T14:00", 5)], SETTINGS, utc("2026-12-04T00:00")
    )
    assert current == 4
    assert [(s.at, s.min_capacity) for s in steps] == [(utc("2026-12-04T09:00"), 10), (utc("2026-12-04T14:15"), 4)]


def test_back_to_back_events_with_equal_capacity_make_no_step_between_them() -> None:
    events = [occ("2026-12-04T10:00", "2026-12-04T11:00", 2, "a"), occ("2026-12-04T11:00", "2026-12-04T12:00", 2, "b")]
    _, steps = planner.timeline(VARIANT, events, SETTINGS, utc("2026-12-04T00:00"))
    assert [s.min_capacity for s in steps] == [8, 4]


def test_events_beyond_the_horizon_are_not_planned() -> None:
    _, steps = planner.timeline(
        VARIANT, [occ("2026-12-10T10:00", "2026-12-10T11:00", 2)], SETTINGS, utc("2026-12-04T00:00")
    )
    assert steps == []


def test_today_scales_the_levels_outside_events_and_its_steps_fall_on_slots_in_utc() -> None:
    # Baseline 12 x 1.25 / 4 = 3.75 -> 4 instances; at half, 1.9 -> the floor (2); from 03:00 at three quarters,
    # 2.8 -> 3. The night's off-peak window (x0.4: 1.5 -> 2) and the event (x2 -> 8) are as configured below it.
    def today(at: datetime) -> float:
        return 0.5 if at < utc("2026-12-04T03:00") else 0.75 if at < utc("2026-12-04T06:00") else 1.0

    events = [occ("2026-12-04T07:00", "2026-12-04T08:00", 0.4, "night"), occ("2026-12-04T12:00", "2026-12-04T13:00", 2)]
    current, steps = planner.timeline(VARIANT, events, SETTINGS, utc("2026-12-04T00:02"), today)

    assert current == 2
    assert [(s.at, s.min_capacity, s.timezone) for s in steps] == [
        (utc("2026-12-04T03:00"), 3, "UTC"),
        (utc("2026-12-04T06:00"), 4, "UTC"),
        (utc("2026-12-04T07:00"), 2, "UTC"),  # the night window's own edge
        (utc("2026-12-04T08:00"), 4, "UTC"),
        (utc("2026-12-04T10:00"), 8, "UTC"),  # the event, two hours of lead before it
        (utc("2026-12-04T13:15"), 4, "UTC"),
    ]
    assert steps[0].reason == "today's level x0.75"


def test_a_busier_day_raises_the_events_and_leaves_the_everyday_level() -> None:
    # Today at 1.5 of the configured level: the x1.5 event is sized at 12 x 2.25 x 1.25 / 4 = 8.4 -> 9 instances
    # (6 as configured); outside it the baseline stays 4 (target tracking serves the everyday traffic).
    event = occ("2026-12-04T12:00", "2026-12-04T13:00", 1.5)
    current, steps = planner.timeline(VARIANT, [event], SETTINGS, utc("2026-12-04T00:00"), lambda _: 1.5)

    assert current == 4
    assert [(s.at, s.min_capacity) for s in steps] == [(utc("2026-12-04T10:00"), 9), (utc("2026-12-04T13:15"), 4)]
    assert steps[0].reason == "e (x1.5); today's level x1.50"


def test_todays_level_against_the_configured_one_counts_off_peak_and_leaves_events_out() -> None:
    # The last two hours, 07:50 to 09:50 (ending 10 minutes before now): two slots of the x0.4 off-peak night
    # (4.8 expected) at 3 req/s, then 22 at 6 where 12 were expected: (2 x 3 + 22 x 6) / (2 x 4.8 + 22 x 12) =
    # 0.504. A drop at 08:30-09:00, widened by an hour before and 30 minutes after, leaves four slots: too few.
    now = utc("2026-12-04T10:00")
    start = now - timedelta(hours=6)
    rps = tuple(3.0 if start + i * SLOT < utc("2026-12-04T08:00") else 6.0 for i in range(72))
    history = DemandSeries(start, rps)
    night = occ("2026-12-04T00:00", "2026-12-04T08:00", 0.4, "night")
    assert planner.configured_today(VARIANT, [night], now, history) == 0.504386
    event = occ("2026-12-04T08:30", "2026-12-04T09:00", 2, "drop")
    assert planner.configured_today(VARIANT, [night, event], now, history) == 1.0
    # Busier than configured is read as well (a new endpoint's events are sized from it): 24 req/s is x2.
    busy = DemandSeries(start, (24.0,) * 72)
    assert planner.configured_today(VARIANT, [], now, busy) == 2.0


def test_action_names_are_deterministic_and_in_utc() -> None:
    assert planner.action_name("ep", "primary", utc("2026-12-04T09:00")) == "prescale-ep-primary-20261204T0900Z"


def test_diff_creates_updates_and_deletes_by_name() -> None:
    def act(name: str, minimum: int) -> ScheduledAction:
        return ScheduledAction(
            name=name,
            endpoint_name="ep",
            variant_name="v",
            schedule="at(2026-12-04T18:00:00)",
            timezone="Asia/Tokyo",
            min_capacity=minimum,
            max_capacity=10,
        )

    changes = planner.diff(
        [act("a", 4), act("b", 8), act("keep", 2)], [act("b", 6), act("gone", 3), act("keep", 2)], {"a": "why a"}
    )
    assert [(c.kind, c.name) for c in changes] == [("create", "a"), ("update", "b"), ("delete", "gone")]
    assert changes[0].reason == "why a"
