"""The yearly kind: a month and day every year, resolved in its own time zone, 29 February included."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from fleetops.calendar import YearlyEvent
from fleetops.config import PrescaleSettings, VariantConfig
from fleetops.prescale import planner
from fleetops.validation import problems

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


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def yearly(**changes: Any) -> YearlyEvent:
    return YearlyEvent.model_validate({**SPRING_ANIME, **changes})


def spans(entry: YearlyEvent, start: str, end: str) -> list[tuple[datetime, datetime]]:
    return [(o.start, o.end) for o in entry.occurrences(utc(start), utc(end))]


def test_an_occurrence_in_the_window_is_found_in_utc_and_only_that_year() -> None:
    # 1 April 10:00-14:00 JST (UTC+9, no daylight saving) is 01:00-05:00Z.
    assert spans(yearly(), "2027-03-25T00:00", "2027-04-08T00:00") == [
        (utc("2027-04-01T01:00"), utc("2027-04-01T05:00"))
    ]
    assert spans(yearly(), "2027-04-02T00:00", "2027-09-30T00:00") == []
    # Two years in one window: one occurrence each.
    assert len(spans(yearly(), "2027-01-01T00:00", "2029-01-01T00:00")) == 2


def test_duration_instead_of_end() -> None:
    autumn = yearly(month=10, end=None, duration_minutes=240)
    assert spans(autumn, "2027-09-30T00:00", "2027-10-02T00:00") == [(utc("2027-10-01T01:00"), utc("2027-10-01T05:00"))]


def test_across_the_year_boundary() -> None:
    # New Year countdown 22:00-02:00 JST: it starts on 31 December and ends on 1 January local time.
    countdown = yearly(name="countdown", month=12, day=31, local_time="22:00", end="02:00")
    # A window opening at 01:00 JST on 1 January 2027 still finds the occurrence that began in 2026.
    assert spans(countdown, "2026-12-31T16:00", "2027-01-02T00:00") == [
        (utc("2026-12-31T13:00"), utc("2026-12-31T17:00"))
    ]
    # 1 January 05:00 JST is still 31 December in UTC: a window of UTC 31 December finds next year's entry.
    new_year = yearly(name="new-year", month=1, day=1, local_time="05:00", end="08:00")
    assert spans(new_year, "2026-12-31T00:00", "2026-12-31T23:00") == [
        (utc("2026-12-31T20:00"), utc("2026-12-31T23:00"))
    ]


def test_local_time_follows_daylight_saving() -> None:
    # US daylight saving starts 2026-03-08: 10:00 in Los Angeles is 18:00Z on 1 March, 17:00Z on 15 March.
    before = yearly(month=3, day=1, timezone="America/Los_Angeles")
    after = yearly(month=3, day=15, timezone="America/Los_Angeles")
    assert spans(before, "2026-02-20T00:00", "2026-03-20T00:00")[0][0] == utc("2026-03-01T18:00")
    assert spans(after, "2026-02-20T00:00", "2026-03-20T00:00")[0][0] == utc("2026-03-15T17:00")


def test_29_february_is_on_28_february_in_common_years() -> None:
    leap_day = yearly(name="leap-day", month=2, day=29, timezone="UTC", local_time="10:00", end="12:00")
    assert spans(leap_day, "2028-02-01T00:00", "2028-03-10T00:00") == [
        (utc("2028-02-29T10:00"), utc("2028-02-29T12:00"))
    ]
    assert spans(leap_day, "2027-02-01T00:00", "2027-03-10T00:00") == [
        (utc("2027-02-28T10:00"), utc("2027-02-28T12:00"))
    ]
    assert spans(leap_day, "2100-02-01T00:00", "2100-03-10T00:00")[0][0] == utc("2100-02-28T10:00")  # not leap


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"month": 2, "day": 30}, "entry: Value error, month 2 has no day 30"),
        ({"month": 4, "day": 31}, "entry: Value error, month 4 has no day 31"),
        ({"month": 13}, "month: Input should be less than or equal to 12"),
        ({"duration_minutes": 60}, "give exactly one of 'end' or 'duration_minutes'"),
        ({"end": None}, "give exactly one of 'end' or 'duration_minutes'"),
        ({"end": "10:00"}, "end equals local_time"),
        ({"timezone": "Asia/Tokio"}, "unknown time zone 'Asia/Tokio'"),
    ],
)
def test_an_impossible_yearly_entry_says_why(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        yearly(**changes)
    assert says in " ".join(problems(caught.value, root="entry"))


def test_a_yearly_occurrence_in_the_planning_window_is_pre_scaled_like_an_event() -> None:
    variant = VariantConfig(
        name="primary", capacity_rps_per_instance=4, baseline_rps=12, headroom=1.25, floor=2, cap=20
    )
    settings = PrescaleSettings(lead_time_minutes=120, scale_in_delay_minutes=15, planning_horizon_hours=48)
    now = utc("2027-03-31T00:00")
    found = yearly().occurrences(now, utc("2027-04-03T00:00"))

    current, steps = planner.timeline(variant, found, settings, now)

    # x2 -> 8 instances two hours before 10:00 JST (23:00Z the day before), back to 4 at 14:15 JST.
    assert current == 4
    assert [(s.at, s.min_capacity, s.timezone) for s in steps] == [
        (utc("2027-03-31T23:00"), 8, "Asia/Tokyo"),
        (utc("2027-04-01T05:15"), 4, "Asia/Tokyo"),
    ]
    assert "spring-anime-announcements (x2)" in steps[0].reason
