"""The calendar as one list discriminated on ``kind``: rows without a kind, rows of any kind, unknown kinds."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import TypeAdapter

from fleetops.calendar import (
    KINDS,
    CalendarEntry,
    OffPeakWindow,
    OneOffEvent,
    RecurringEvent,
    YearlyEvent,
    parse_entries,
)
from fleetops.config import load_fleet_config
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
    #   autumn-anime (calendar-table): kind: unknown kind 'seasonal'; valid kinds: daily, off_peak, one_off, recurring, yearly
    # and, for a row without a name, its position in its source (#2). The other entries still apply.
    assert [e.name for e in ok] == ["One Piece ch. 1100"]
    assert [(b.source, b.name, b.errors) for b in bad] == [
        (
            "calendar-table",
            "autumn-anime",
            ["kind: unknown kind 'seasonal'; valid kinds: daily, off_peak, one_off, recurring, yearly"],
        ),
        ("calendar-table", "#2", ["kind: unknown kind 'monthly'; valid kinds: daily, off_peak, one_off, recurring, yearly"]),
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
