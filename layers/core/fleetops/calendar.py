"""Release calendar: one list of entries, each a kind of its own (weekly, dated, yearly, daily, daily off-peak).

:data:`CalendarEntry` is a pydantic union discriminated on ``kind``; each kind is one model that says when
it happens (:meth:`spans`), so adding a kind is adding one class here and naming it in the union.

Each entry is validated on its own. :func:`parse_entries` returns the valid entries and a list of
:class:`InvalidEntry` for the rest, so one typo in the calendar never stops pre-scaling for the
other releases.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, date, datetime, time, timedelta
from enum import IntEnum
from typing import Annotated, Any, Literal, get_args
from zoneinfo import ZoneInfo

from pydantic import Field, ValidationError, field_validator, model_validator

from fleetops.validation import StrictModel, check_zone, problems

Span = tuple[datetime, datetime]


class Weekday(IntEnum):
    monday = 0
    tuesday = 1
    wednesday = 2
    thursday = 3
    friday = 4
    saturday = 5
    sunday = 6


class Occurrence(StrictModel):
    """One concrete time window of an entry, in UTC."""

    name: str
    start: datetime
    end: datetime
    multiplier: float
    reason: str
    timezone: str
    endpoints: tuple[str, ...]
    kind: str = ""  # the entry's kind: a one-off keeps its configured size, the others can learn theirs

    @property
    def raises(self) -> bool:
        """An event (multiplier >= 1) raises capacity; an off-peak window lowers it."""
        return self.multiplier >= 1

    def applies_to(self, endpoint: str) -> bool:
        return not self.endpoints or endpoint in self.endpoints


class _Entry(StrictModel):
    name: str = Field(min_length=1)
    timezone: str
    multiplier: float = Field(gt=0, description="traffic relative to the baseline; < 1 lowers capacity")
    reason: str = ""
    endpoints: tuple[str, ...] = Field(default=(), description="endpoints it applies to; empty means all")

    _zone = field_validator("timezone")(check_zone)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @abstractmethod
    def spans(self, window_start: datetime, window_end: datetime) -> Iterable[Span]:
        """Local (zone-aware) start and end of every occurrence that may overlap the window; may give more."""

    def occurrences(self, window_start: datetime, window_end: datetime) -> list[Occurrence]:
        """Concrete UTC windows of this entry that overlap ``[window_start, window_end)``.

        Local times are resolved in the entry's own zone, so an 18:00 event stays at 18:00 local time
        across daylight-saving changes.
        """
        found = []
        for start, end in self.spans(window_start, window_end):
            start_utc, end_utc = start.astimezone(UTC), end.astimezone(UTC)
            if start_utc < window_end and end_utc > window_start:
                found.append(
                    Occurrence(
                        name=self.name,
                        start=start_utc,
                        end=end_utc,
                        multiplier=self.multiplier,
                        reason=self.reason or self.name,
                        timezone=self.timezone,
                        endpoints=self.endpoints,
                        kind=str(getattr(self, "kind", "")),
                    )
                )
        return found


def _local(day: date, at: time, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, at, tzinfo=zone)


def _days(start: datetime, end: datetime, zone: ZoneInfo) -> Iterator[date]:
    day = start.astimezone(zone).date() - timedelta(days=1)
    last = end.astimezone(zone).date() + timedelta(days=1)
    while day <= last:
        yield day
        day += timedelta(days=1)


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

    def spans(self, window_start: datetime, window_end: datetime) -> Iterator[Span]:
        for day in _days(window_start, window_end, self.zone):
            if day.weekday() == self.weekday:
                start = _local(day, self.local_time, self.zone)
                yield start, start + timedelta(minutes=self.duration_minutes)


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

    def spans(self, window_start: datetime, window_end: datetime) -> Iterator[Span]:
        start = self.start.replace(tzinfo=self.zone)
        if self.end is not None:
            yield start, self.end.replace(tzinfo=self.zone)
        else:
            yield start, start + timedelta(minutes=self.duration_minutes or 0)


class YearlyEvent(_Entry):
    """Every year on ``month``/``day`` at ``local_time`` (e.g. spring anime announcements, 1 April 10:00 JST).

    It lasts ``duration_minutes`` or until ``end`` (local time; at or before ``local_time`` means the next
    day). 29 February falls on 28 February in common years: the entry still comes every year, and in its
    own month.
    """

    kind: Literal["yearly"] = "yearly"
    month: int = Field(ge=1, le=12)
    day: int = Field(ge=1, le=31)
    local_time: time
    end: time | None = None
    duration_minutes: int | None = Field(default=None, gt=0, le=31 * 24 * 60)

    @model_validator(mode="after")
    def _valid_date_and_end(self) -> YearlyEvent:
        try:
            date(2000, self.month, self.day)  # a leap year: 29 February is allowed
        except ValueError:
            raise ValueError(f"month {self.month} has no day {self.day}") from None
        if (self.end is None) == (self.duration_minutes is None):
            raise ValueError("give exactly one of 'end' or 'duration_minutes'")
        if self.end == self.local_time:
            raise ValueError("end equals local_time")
        return self

    def _date_in(self, year: int) -> date:
        try:
            return date(year, self.month, self.day)
        except ValueError:  # only 29 February in a common year gets here (checked above)
            return date(year, 2, 28)

    def spans(self, window_start: datetime, window_end: datetime) -> Iterator[Span]:
        zone = self.zone
        # From the year before: an occurrence that began last year may still be running (New Year's Eve).
        for year in range(window_start.astimezone(zone).year - 1, window_end.astimezone(zone).year + 1):
            day = self._date_in(year)
            start = _local(day, self.local_time, zone)
            if self.end is None:
                yield start, start + timedelta(minutes=self.duration_minutes or 0)
            else:
                end_day = day + timedelta(days=1) if self.end <= self.local_time else day
                yield start, _local(end_day, self.end, zone)


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

    def spans(self, window_start: datetime, window_end: datetime) -> Iterator[Span]:
        return _daily_spans(self.start, self.end, self.zone, window_start, window_end)


class DailyWindow(_Entry):
    """Every day from ``start`` to ``end`` local time (may cross midnight), multiplier 1 or more: a daily busy
    window that raises capacity (e.g. the evening reading hour), the counterpart of :class:`OffPeakWindow`."""

    kind: Literal["daily"] = "daily"
    start: time
    end: time
    multiplier: float = Field(ge=1, description="traffic relative to the baseline inside the window")

    @model_validator(mode="after")
    def _not_empty(self) -> DailyWindow:
        if self.start == self.end:
            raise ValueError("daily window start and end are equal")
        return self

    def spans(self, window_start: datetime, window_end: datetime) -> Iterator[Span]:
        return _daily_spans(self.start, self.end, self.zone, window_start, window_end)


def _daily_spans(
    start: time, end: time, zone: ZoneInfo, window_start: datetime, window_end: datetime
) -> Iterator[Span]:
    for day in _days(window_start, window_end, zone):
        end_day = day + timedelta(days=1) if end <= start else day
        yield _local(day, start, zone), _local(end_day, end, zone)


# The one list of kinds: a new kind is a class above and its name here.
_AnyEntry = RecurringEvent | OneOffEvent | OffPeakWindow | YearlyEvent | DailyWindow
CalendarEntry = Annotated[_AnyEntry, Field(discriminator="kind")]

KINDS: dict[str, type[_AnyEntry]] = {model.model_fields["kind"].default: model for model in get_args(_AnyEntry)}


class InvalidEntry(StrictModel):
    """A calendar entry that was skipped, and why (shown in the plan, the log and a metric)."""

    source: str
    name: str
    errors: list[str]


class UnknownKindError(ValueError):
    """An entry's ``kind`` is none of :data:`KINDS`; the message lists them."""


def parse_entry(raw: Any, default_kind: str) -> CalendarEntry:
    """One entry as the model of its ``kind`` (``default_kind`` when it has none).

    Validated by its kind's own model, as the discriminated union would, so a problem reads
    ``field: message`` without the union's tag in front.

    Raises
    ------
    UnknownKindError
        For a ``kind`` that is not one of :data:`KINDS`.
    ValidationError
        For anything else wrong with the entry.
    """
    if not isinstance(raw, Mapping):
        return KINDS[default_kind].model_validate(raw)  # its error says it expected a mapping
    data = {"kind": default_kind, **raw}
    model = KINDS.get(data["kind"]) if isinstance(data["kind"], str) else None
    if model is None:
        raise UnknownKindError(f"kind: unknown kind {data['kind']!r}; valid kinds: {', '.join(sorted(KINDS))}")
    return model.model_validate(data)


def parse_entries(
    source: str,
    raw_entries: Iterable[Mapping[str, Any]],
    default_kind: str,
    known_endpoints: frozenset[str],
) -> tuple[list[CalendarEntry], list[InvalidEntry]]:
    """Validate entries one by one; return the valid ones and the reasons for the others.

    An entry without ``kind`` is of ``default_kind`` (its source's kind), so rows written before kinds
    existed read as they always did. An invalid entry is named by its ``name``, else its ``event_id``,
    else its position (``#3``).

    Examples
    --------
    >>> ok, bad = parse_entries("fleet.yaml", [{"name": "x", "timezone": "Mars/Base", "multiplier": 2,
    ...     "weekday": "monday", "local_time": "18:00", "duration_minutes": 60}], "recurring", frozenset())
    >>> (len(ok), bad[0].errors[0].startswith("timezone"))
    (0, True)
    >>> parse_entries("calendar-table", [{"name": "y", "kind": "monthly"}], "one_off", frozenset())[1][0].errors
    ["kind: unknown kind 'monthly'; valid kinds: daily, off_peak, one_off, recurring, yearly"]
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
            entry = parse_entry(raw, default_kind)
        except UnknownKindError as exc:
            invalid.append(InvalidEntry(source=source, name=label, errors=[str(exc)]))
            continue
        except ValidationError as exc:
            invalid.append(InvalidEntry(source=source, name=label, errors=problems(exc, root="entry")))
            continue
        unknown = sorted(set(entry.endpoints) - known_endpoints)
        if unknown:
            invalid.append(
                InvalidEntry(source=source, name=label, errors=[f"endpoints: unknown endpoint(s) {unknown}"])
            )
            continue
        valid.append(entry)
    return valid, invalid
