"""Pure planning: timelines, action names, diffs."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetops.calendar import Occurrence
from fleetops.capacity import ScheduledAction
from fleetops.config import PrescaleSettings, VariantConfig
from fleetops.prescale import planner

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
