"""Release calendar: recurring weekly events, dated one-off events and daily off-peak windows.

Each entry is validated on its own. :func:`parse_entries` returns the valid entries and a list of
:class:`InvalidEntry` for the rest, so one typo in the calendar never stops pre-scaling for the
other releases.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, date, datetime, time, timedelta
from enum import IntEnum
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class Weekday(IntEnum):
    monday = 0
    tuesday = 1
    wednesday = 2
    thursday = 3
    friday = 4
    saturday = 5
    sunday = 6


def _check_zone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r} (use an IANA name such as 'Asia/Tokyo')") from exc
    return value


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    timezone: str
    multiplier: float = Field(gt=0, description="traffic relative to the baseline; < 1 lowers capacity")
    reason: str = ""
    endpoints: tuple[str, ...] = Field(default=(), description="endpoints it applies to; empty means all")

    _zone = field_validator("timezone")(_check_zone)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


class RecurringEvent(_Entry):
    """Every week on ``weekday`` at ``local_time`` (e.g. Shonen Jump Mondays 18:00 JST x2.0)."""

    kind: Literal["recurring"] = "recurring"
    weekday: Weekday
    local_time: time
    duration_minutes: int = Field(gt=0, le=7 * 24 * 60)

    @field_validator("weekday", mode="before")
    @classmethod
    def _weekday_by_name(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return Weekday[value.strip().lower()]
            except KeyError as exc:
                raise ValueError(f"unknown weekday {value!r}") from exc
        return value


class OneOffEvent(_Entry):
    """A dated release (e.g. One Piece ch. 1100, 2026-12-04 20:00 JST, x3 for 3 h); lives in DynamoDB."""

    kind: Literal["one_off"] = "one_off"
    start: datetime = Field(description="local wall-clock time in ``timezone``, without offset")
    end: datetime | None = None
    duration_minutes: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _has_valid_end(self) -> OneOffEvent:
        if (self.end is None) == (self.duration_minutes is None):
            raise ValueError("give exactly one of 'end' or 'duration_minutes'")
        if self.start.tzinfo is not None or (self.end is not None and self.end.tzinfo is not None):
            raise ValueError("give start/end as local wall-clock times without an offset; the zone is 'timezone'")
        if self.end is not None and self.end <= self.start:
            raise ValueError(f"end {self.end.isoformat()} is not after start {self.start.isoformat()}")
        return self


class OffPeakWindow(_Entry):
    """Every day from ``start`` to ``end`` local time (may cross midnight), multiplier below 1."""

    kind: Literal["off_peak"] = "off_peak"
    start: time
    end: time
    multiplier: float = Field(gt=0, lt=1)

    @model_validator(mode="after")
    def _not_empty(self) -> OffPeakWindow:
        if self.start == self.end:
            raise ValueError("off-peak start and end are equal")
        return self


CalendarEntry = RecurringEvent | OneOffEvent | OffPeakWindow


class InvalidEntry(BaseModel):
    """A calendar entry that was skipped, and why (shown in the plan, the log and a metric)."""

    source: str
    name: str
    errors: list[str]


class Occurrence(BaseModel):
    """One concrete time window of an entry, in UTC."""

    model_config = ConfigDict(frozen=True)

    name: str
    start: datetime
    end: datetime
    multiplier: float
    reason: str
    timezone: str
    endpoints: tuple[str, ...]

    def applies_to(self, endpoint: str) -> bool:
        return not self.endpoints or endpoint in self.endpoints


def _error_lines(exc: ValidationError) -> list[str]:
    return [f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors()]


def parse_entries(
    source: str,
    raw_entries: Iterable[Mapping[str, Any]],
    model: type[RecurringEvent] | type[OneOffEvent] | type[OffPeakWindow],
    known_endpoints: frozenset[str],
) -> tuple[list[CalendarEntry], list[InvalidEntry]]:
    """Validate entries one by one; return the valid ones and the reasons for the others.

    Examples
    --------
    >>> ok, bad = parse_entries("fleet.yaml", [{"name": "x", "timezone": "Mars/Base", "multiplier": 2,
    ...     "weekday": "monday", "local_time": "18:00", "duration_minutes": 60}], RecurringEvent, frozenset())
    >>> (len(ok), bad[0].errors[0].startswith("timezone"))
    (0, True)
    """
    valid: list[CalendarEntry] = []
    invalid: list[InvalidEntry] = []
    for position, raw in enumerate(raw_entries):
        label = (
            str(raw.get("name") or raw.get("event_id") or f"#{position}")
            if isinstance(raw, Mapping)
            else f"#{position}"
        )
        try:
            entry = model.model_validate(raw)
        except ValidationError as exc:
            invalid.append(InvalidEntry(source=source, name=label, errors=_error_lines(exc)))
            continue
        unknown = sorted(set(entry.endpoints) - known_endpoints)
        if unknown:
            invalid.append(
                InvalidEntry(source=source, name=label, errors=[f"endpoints: unknown endpoint(s) {unknown}"])
            )
            continue
        valid.append(entry)
    return valid, invalid


def _local(day: date, at: time, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, at, tzinfo=zone)


def _days(start: datetime, end: datetime, zone: ZoneInfo) -> Iterator[date]:
    day = start.astimezone(zone).date() - timedelta(days=1)
    last = end.astimezone(zone).date() + timedelta(days=1)
    while day <= last:
        yield day
        day += timedelta(days=1)


def occurrences(entry: CalendarEntry, window_start: datetime, window_end: datetime) -> list[Occurrence]:
    """Concrete UTC windows of ``entry`` that overlap ``[window_start, window_end)``.

    Local times are resolved in the entry's own zone, so an 18:00 event stays at 18:00 local time
    across daylight-saving changes.
    """
    zone = entry.zone
    spans: list[tuple[datetime, datetime]] = []
    if isinstance(entry, OneOffEvent):
        start = entry.start.replace(tzinfo=zone)
        end = entry.end.replace(tzinfo=zone) if entry.end else start + timedelta(minutes=entry.duration_minutes or 0)
        spans.append((start, end))
    elif isinstance(entry, RecurringEvent):
        for day in _days(window_start, window_end, zone):
            if day.weekday() == entry.weekday:
                start = _local(day, entry.local_time, zone)
                spans.append((start, start + timedelta(minutes=entry.duration_minutes)))
    else:
        for day in _days(window_start, window_end, zone):
            start = _local(day, entry.start, zone)
            end_day = day + timedelta(days=1) if entry.end <= entry.start else day
            spans.append((start, _local(end_day, entry.end, zone)))
    found = []
    for start, end in spans:
        start_utc, end_utc = start.astimezone(UTC), end.astimezone(UTC)
        if start_utc < window_end and end_utc > window_start:
            found.append(
                Occurrence(
                    name=entry.name,
                    start=start_utc,
                    end=end_utc,
                    multiplier=entry.multiplier,
                    reason=entry.reason or entry.name,
                    timezone=entry.timezone,
                    endpoints=entry.endpoints,
                )
            )
    return found
