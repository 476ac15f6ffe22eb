"""The calendar as one list discriminated on ``kind``: rows without a kind, rows of any kind, unknown kinds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import TypeAdapter

from fleetops.calendar import (
    KINDS,
    CalendarEntry,
    DailyWindow,
    OffPeakWindow,
    OneOffEvent,
    RecurringEvent,
    YearlyEvent,
    parse_entries,
)
from fleetops.config import PrescaleSettings, VariantConfig, load_fleet_config
from fleetops.prescale import planner
from tests.conftest import REPO

KNOWN = frozenset({"manga-chat-prod"})
ONE_PIECE = {
    "name": "One Piece ch. 1100",
    "start": "2026-12-04T20:00",
    "timezone": "Asia/Tokyo",
    "duration_minutes": 180,
    "multiplier": 3,
}
SPRING_ANIME = {
    "kind": "yearly",
    "name": "spring-anime-announcements",
    "month": 4,
    "day": 1,
    "local_time": "10:00",
    "end": "14:00",
    "timezone": "Asia/Tokyo",
    "multiplier": 2,
}


def test_the_kinds() -> None:
    assert sorted(KINDS) == ["daily", "off_peak", "one_off", "recurring", "yearly"]


def test_rows_without_a_kind_read_as_their_source_always_did() -> None:
    # The shipped fleet.yaml and a calendar-table row as the current code writes them (no "kind").
    config = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
    recurring, bad_recurring = parse_entries("fleet.yaml:recurring", config.recurring, "recurring", KNOWN)
    off_peak, bad_off_peak = parse_entries("fleet.yaml:off_peak", config.off_peak, "off_peak", KNOWN)
    one_off, bad_one_off = parse_entries("calendar-table", [ONE_PIECE], "one_off", KNOWN)

    assert bad_recurring == bad_off_peak == bad_one_off == []
    assert [type(e) for e in recurring] == [RecurringEvent] * len(config.recurring)
    assert [type(e) for e in off_peak] == [OffPeakWindow] * len(config.off_peak)
    assert one_off == [OneOffEvent.model_validate(ONE_PIECE)]
    # The same row with its kind written out is the same entry.
    assert parse_entries("calendar-table", [{**ONE_PIECE, "kind": "one_off"}], "one_off", KNOWN)[0] == one_off


def test_a_row_of_another_kind_is_read_as_that_kind() -> None:
    ok, bad = parse_entries("calendar-table", [ONE_PIECE, SPRING_ANIME], "one_off", KNOWN)
    assert bad == []
    assert [type(e) for e in ok] == [OneOffEvent, YearlyEvent]


def test_an_unknown_kind_is_skipped_naming_the_entry_and_the_valid_kinds() -> None:
    rows = [
        {**SPRING_ANIME, "name": "autumn-anime", "kind": "seasonal"},
        ONE_PIECE,
        {"kind": "monthly", "day": 1},
    ]

    ok, bad = parse_entries("calendar-table", rows, "one_off", KNOWN)

    # What the operator sees in the plan's invalid_entries, the log line and the PrescaleInvalidEntries metric:
    #   autumn-anime (calendar-table): kind: unknown kind 'seasonal';
    #     valid kinds: daily, off_peak, one_off, recurring, yearly
    # and, for a row without a name, its position in its source (#2). The other entries still apply.
    assert [e.name for e in ok] == ["One Piece ch. 1100"]
    assert [(b.source, b.name, b.errors) for b in bad] == [
        (
            "calendar-table",
            "autumn-anime",
            ["kind: unknown kind 'seasonal'; valid kinds: daily, off_peak, one_off, recurring, yearly"],
        ),
        (
            "calendar-table",
            "#2",
            ["kind: unknown kind 'monthly'; valid kinds: daily, off_peak, one_off, recurring, yearly"],
        ),
    ]


def test_a_field_error_reads_without_the_kind_in_front() -> None:
    _, bad = parse_entries("calendar-table", [{**SPRING_ANIME, "month": 13, "multipler": 3}], "one_off", KNOWN)
    assert bad[0].errors == [
        "month: Input should be less than or equal to 12",
        "multipler: Extra inputs are not permitted",
    ]


def test_the_union_validates_a_mixed_list_by_kind() -> None:
    entries = TypeAdapter(list[CalendarEntry]).validate_python(
        [{**ONE_PIECE, "kind": "one_off"}, SPRING_ANIME, {"kind": "off_peak", **_night()}]
    )
    assert [type(e) for e in entries] == [OneOffEvent, YearlyEvent, OffPeakWindow]
    window = (datetime(2027, 3, 31, tzinfo=UTC), datetime(2027, 4, 2, tzinfo=UTC))
    assert [o.name for o in entries[1].occurrences(*window)] == ["spring-anime-announcements"]


def _night() -> dict[str, object]:
    return {"name": "night", "start": "01:00", "end": "08:00", "timezone": "Asia/Tokyo", "multiplier": 0.4}


# The daily kind: a busy window every day that raises capacity, the counterpart of an off-peak window.

EVENING = {
    "kind": "daily",
    "name": "evening-reading",
    "start": "19:00",
    "end": "21:00",
    "timezone": "America/Los_Angeles",
    "multiplier": 2,
}


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_daily_row_is_read_as_a_daily_window_from_any_source() -> None:
    from_table, bad_table = parse_entries("calendar-table", [EVENING], "one_off", KNOWN)
    from_yaml, bad_yaml = parse_entries("fleet.yaml:recurring", [EVENING], "recurring", KNOWN)
    assert bad_table == bad_yaml == []
    assert [type(e) for e in from_table + from_yaml] == [DailyWindow, DailyWindow]


def test_a_daily_window_below_one_is_refused_naming_the_multiplier() -> None:
    ok, bad = parse_entries("fleet.yaml:recurring", [{**EVENING, "multiplier": 0.5}], "recurring", KNOWN)
    assert ok == []
    assert [(b.name, b.errors) for b in bad] == [
        ("evening-reading", ["multiplier: Input should be greater than or equal to 1"])
    ]


def test_a_daily_window_with_equal_start_and_end_is_refused() -> None:
    _, bad = parse_entries("fleet.yaml:recurring", [{**EVENING, "end": "19:00"}], "recurring", KNOWN)
    assert bad[0].errors == ["entry: Value error, daily window start and end are equal"]


def test_a_daily_window_crossing_midnight_ends_the_next_day() -> None:
    late = DailyWindow.model_validate({**EVENING, "start": "22:00", "end": "02:00", "timezone": "Europe/London"})
    found = late.occurrences(_utc("2026-12-04T12:00"), _utc("2026-12-05T12:00"))
    # London is on UTC in December: Friday 22:00 to Saturday 02:00.
    assert [(o.start, o.end) for o in found] == [(_utc("2026-12-04T22:00"), _utc("2026-12-05T02:00"))]
    assert [(o.kind, o.multiplier, o.raises) for o in found] == [("daily", 2.0, True)]


def test_a_daily_window_stays_at_its_local_time_across_daylight_saving() -> None:
    evening = DailyWindow.model_validate(EVENING)
    # Los Angeles moves from PST (UTC-8) to PDT (UTC-7) on Sunday 2026-03-08.
    found = evening.occurrences(_utc("2026-03-07T12:00"), _utc("2026-03-09T12:00"))
    assert [(o.start, o.end) for o in found] == [
        (_utc("2026-03-08T03:00"), _utc("2026-03-08T05:00")),  # Saturday 19:00-21:00 PST
        (_utc("2026-03-09T02:00"), _utc("2026-03-09T04:00")),  # Sunday 19:00-21:00 PDT
    ]


def test_a_daily_window_over_the_night_the_clocks_go_forward_is_an_hour_shorter() -> None:
    night = DailyWindow.model_validate({**EVENING, "start": "00:00", "end": "04:00"})
    [change] = [o for o in night.occurrences(_utc("2026-03-08T00:00"), _utc("2026-03-09T00:00")) if o.start.day == 8]
    # 00:00 PST is 08:00Z; 04:00 PDT is 11:00Z: three hours that night.
    assert (change.start, change.end) == (_utc("2026-03-08T08:00"), _utc("2026-03-08T11:00"))


def test_a_daily_window_raises_the_configured_levels_like_a_weekly_event() -> None:
    variant = VariantConfig(
        name="primary", capacity_rps_per_instance=4, baseline_rps=12, headroom=1.25, floor=2, cap=10
    )
    settings = PrescaleSettings(lead_time_minutes=120, scale_in_delay_minutes=15, planning_horizon_hours=48)
    daily = DailyWindow.model_validate({**EVENING, "start": "18:00", "end": "20:00", "timezone": "UTC"})
    now = _utc("2026-12-04T00:00")

    current, steps = planner.timeline(
        variant, daily.occurrences(now - timedelta(days=1), now + timedelta(days=3)), settings, now
    )

    # Baseline ceil(12 x 1.25 / 4) = 4; x2: ceil(7.5) = 8, from 2 hours before 18:00 to 15 minutes after 20:00.
    assert current == 4
    assert [(s.at, s.min_capacity) for s in steps] == [
        (_utc("2026-12-04T16:00"), 8),
        (_utc("2026-12-04T20:15"), 4),
        (_utc("2026-12-05T16:00"), 8),
        (_utc("2026-12-05T20:15"), 4),
    ]
    assert steps[0].reason == "evening-reading (x2)"
