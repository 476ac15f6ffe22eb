"""Calendar entries of the weekly, one-off and off-peak kinds: per-entry validation and occurrences in UTC."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetops.calendar import OffPeakWindow, OneOffEvent, RecurringEvent, parse_entries

KNOWN = frozenset({"manga-chat-prod"})


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_weekly_event_in_jst_resolves_to_utc() -> None:
    monday = RecurringEvent.model_validate(
        {
            "name": "jump",
            "weekday": "Monday",
            "local_time": "18:00",
            "timezone": "Asia/Tokyo",
            "duration_minutes": 180,
            "multiplier": 2.0,
        }
    )
    found = monday.occurrences(utc("2026-11-30T00:00"), utc("2026-12-08T00:00"))
    assert [(o.start, o.end) for o in found] == [
        (utc("2026-11-30T09:00"), utc("2026-11-30T12:00")),
        (utc("2026-12-07T09:00"), utc("2026-12-07T12:00")),
    ]


def test_off_peak_window_crossing_midnight_ends_the_next_day() -> None:
    night = OffPeakWindow.model_validate(
        {"name": "night", "start": "23:00", "end": "06:00", "timezone": "Europe/Paris", "multiplier": 0.5}
    )
    found = night.occurrences(utc("2026-07-01T12:00"), utc("2026-07-02T12:00"))
    # CEST is UTC+2: 23:00 -> 21:00Z, 06:00 next day -> 04:00Z.
    assert (utc("2026-07-01T21:00"), utc("2026-07-02T04:00")) in [(o.start, o.end) for o in found]


def test_one_off_event_with_an_end_time() -> None:
    event = OneOffEvent.model_validate(
        {
            "name": "op",
            "start": "2026-12-04T20:00",
            "end": "2026-12-04T23:00",
            "timezone": "Asia/Tokyo",
            "multiplier": 3,
        }
    )
    [occ] = event.occurrences(utc("2026-12-01T00:00"), utc("2026-12-10T00:00"))
    assert (occ.start, occ.end, occ.multiplier) == (utc("2026-12-04T11:00"), utc("2026-12-04T14:00"), 3)


def test_each_bad_entry_is_reported_with_its_reason_and_the_good_ones_kept() -> None:
    rows = [
        {
            "name": "good",
            "start": "2026-12-04T20:00",
            "duration_minutes": 60,
            "timezone": "Asia/Tokyo",
            "multiplier": 2,
        },
        {
            "name": "both-ends",
            "start": "2026-12-04T20:00",
            "end": "2026-12-04T21:00",
            "duration_minutes": 60,
            "timezone": "Asia/Tokyo",
            "multiplier": 2,
        },
        {
            "name": "offset",
            "start": "2026-12-04T20:00+09:00",
            "duration_minutes": 60,
            "timezone": "Asia/Tokyo",
            "multiplier": 2,
        },
        {
            "name": "typo-field",
            "start": "2026-12-04T20:00",
            "duration_minutes": 60,
            "timezone": "Asia/Tokyo",
            "multiplier": 2,
            "multipler": 3,
        },
        "not a mapping",
    ]
    ok, bad = parse_entries("calendar-table", rows, "one_off", KNOWN)  # type: ignore[arg-type]
    assert [e.name for e in ok] == ["good"]
    reasons = {b.name: " ".join(b.errors) for b in bad}
    assert "exactly one of 'end' or 'duration_minutes'" in reasons["both-ends"]
    assert "without an offset" in reasons["offset"]
    assert "multipler: Extra inputs are not permitted" in reasons["typo-field"]
    assert "#4" in reasons


def test_unknown_weekday_is_named() -> None:
    _, bad = parse_entries(
        "fleet.yaml",
        [
            {
                "name": "x",
                "weekday": "funday",
                "local_time": "18:00",
                "timezone": "UTC",
                "duration_minutes": 5,
                "multiplier": 2,
            }
        ],
        "recurring",
        KNOWN,
    )
    assert "unknown weekday 'funday'" in bad[0].errors[0]
