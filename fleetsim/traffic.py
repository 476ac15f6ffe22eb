"""Traffic for the simulator: requests per minute, generated from the release calendar or read from a CSV.

A generated day is the variant's ``baseline_rps`` shaped by the calendar, whatever the entries' kinds:
occurrences with a multiplier below 1 (off-peak windows) lower it (with half-hour shoulders, people do not
all go to bed at 01:00), events raise it to their multiplier over a ramp and let it fade over the last
third, unpredicted spikes do the same without being in the calendar.
Per-minute noise is log-normal and arrivals are Poisson, both from one seeded generator, so a seed
always gives the same trace.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from fleetops.calendar import CalendarEntry, Occurrence
from fleetops.config import VariantConfig

TICK_S = 60
TICK = timedelta(seconds=TICK_S)
SHOULDER = timedelta(minutes=30)


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message names the file, the line and the reason."""


@dataclass(frozen=True)
class Window:
    """A labelled span of the trace: a calendar event (predicted) or an unpredicted spike."""

    name: str
    start: datetime
    end: datetime
    multiplier: float
    predicted: bool

    def covers(self, t: datetime) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True)
class Spike:
    """Traffic the calendar does not know about (a viral post, a surprise anime announcement)."""

    start: datetime
    minutes: int
    multiplier: float
    name: str = "unpredicted spike"


@dataclass(frozen=True)
class Trace:
    """Requests arriving in each minute from ``start`` (UTC)."""

    start: datetime
    requests: tuple[int, ...]
    windows: tuple[Window, ...] = ()

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            raise ValueError("trace start must be timezone-aware")

    def __len__(self) -> int:
        return len(self.requests)

    def time(self, tick: int) -> datetime:
        return self.start + tick * TICK

    @property
    def end(self) -> datetime:
        return self.time(len(self.requests))

    def with_windows(self, windows: Iterable[Window]) -> Trace:
        return Trace(self.start, self.requests, (*self.windows, *windows))


def _event_level(t: datetime, start: datetime, end: datetime, peak: float, ramp: timedelta) -> float:
    """``peak`` between ``start`` and ``end``: a linear rise over ``ramp``, a linear fade over the last third."""
    if not start <= t < end:
        return 0.0
    rise = min(1.0, (t - start) / ramp) if ramp > timedelta(0) else 1.0
    fade_from = end - (end - start) / 3
    fade = 1.0 if t < fade_from else max(0.0, (end - t) / (end - fade_from))
    return 1.0 + (peak - 1.0) * min(rise, fade)


def _off_peak_level(t: datetime, occ: Occurrence) -> float:
    """The window's multiplier inside it, 1.0 outside, linear over a shoulder on each side."""
    if occ.start <= t < occ.end:
        return occ.multiplier
    gap = min(abs(occ.start - t), abs(t - occ.end))
    if gap >= SHOULDER:
        return 1.0
    return occ.multiplier + (1.0 - occ.multiplier) * (gap / SHOULDER)


def calendar_windows(entries: Sequence[CalendarEntry], endpoint: str, start: datetime, end: datetime) -> list[Window]:
    """The events (multiplier >= 1) of ``entries`` that overlap ``[start, end)``, as predicted windows."""
    found = [
        Window(occ.name, occ.start, occ.end, occ.multiplier, predicted=True)
        for occ in _occurrences(entries, endpoint, start, end)
        if occ.multiplier >= 1
    ]
    return sorted(found, key=lambda w: (w.start, w.name))


def _occurrences(entries: Sequence[CalendarEntry], endpoint: str, start: datetime, end: datetime) -> list[Occurrence]:
    return [occ for entry in entries for occ in entry.occurrences(start, end) if occ.applies_to(endpoint)]


def generate(
    variant: VariantConfig,
    entries: Sequence[CalendarEntry],
    endpoint: str,
    start: datetime,
    end: datetime,
    *,
    seed: int,
    spikes: Sequence[Spike] = (),
    noise: float = 0.08,
    ramp_minutes: int = 10,
) -> Trace:
    """Per-minute arrivals for ``[start, end)`` from the calendar, with its events and ``spikes`` as windows.

    Events and spikes do not add up: the level at any minute is the largest of them, as the planner assumes
    (overlapping events take the larger capacity).
    """
    if end <= start:
        raise ValueError(f"end {end.isoformat()} is not after start {start.isoformat()}")
    start = start.astimezone(UTC)
    ticks = math.ceil((end - start) / TICK)
    events = calendar_windows(entries, endpoint, start - timedelta(days=1), end)
    # The multiplier, not the kind, decides: below 1 lowers the level as the planner lowers capacity.
    quiet = [occ for occ in _occurrences(entries, endpoint, start - SHOULDER, end + SHOULDER) if occ.multiplier < 1]
    surprises = [
        Window(
            s.name, s.start.astimezone(UTC), s.start.astimezone(UTC) + timedelta(minutes=s.minutes), s.multiplier, False
        )
        for s in spikes
    ]
    ramp = timedelta(minutes=ramp_minutes)
    rng = np.random.default_rng(seed)
    jitter = rng.lognormal(mean=-(noise**2) / 2, sigma=noise, size=ticks) if noise > 0 else np.ones(ticks)
    rates = np.empty(ticks)
    for tick in range(ticks):
        t = start + tick * TICK
        daily = min([_off_peak_level(t, occ) for occ in quiet], default=1.0)
        raised = max([_event_level(t, w.start, w.end, w.multiplier, ramp) for w in (*events, *surprises)], default=0)
        rates[tick] = variant.baseline_rps * max(daily, raised) * TICK_S * jitter[tick]
    requests = rng.poisson(rates)
    windows = [w for w in (*events, *surprises) if w.start < end and w.end > start]
    return Trace(start, tuple(int(r) for r in requests), tuple(windows))


def _parse_time(text: str, where: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise TraceError(f"{where}: cannot read the time {text!r} (use ISO 8601, e.g. 2026-12-04T11:00:00Z)") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _parse_count(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: the request count {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: the request count {text!r} must be a non-negative number")
    return value


def load_csv(path: Path) -> Trace:
    """Read ``time,requests`` rows (a CloudWatch ``Invocations`` Sum export, 1- or 5-minute periods).

    A header row is skipped; times without an offset are UTC; a period longer than a minute is spread
    evenly over its minutes. Gaps, repeated or unordered times are refused with their line: a missing
    minute would otherwise read as no traffic.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    rows: list[tuple[int, datetime, float]] = []
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        if len(row) < 2:
            raise TraceError(f"{where}: expected 'time,requests', got {','.join(row)!r}")
        if not rows and not row[1].strip().replace(".", "", 1).isdigit():
            continue  # the header
        rows.append((number, _parse_time(row[0], where), _parse_count(row[1], where)))
    if len(rows) < 2:
        raise TraceError(f"{path}: needs at least two rows of 'time,requests', found {len(rows)}")
    period = rows[1][1] - rows[0][1]
    if period < TICK or period % TICK:
        raise TraceError(f"{path}:{rows[1][0]}: rows are {period.total_seconds():g} s apart; use whole minutes")
    minutes = period // TICK
    requests: list[int] = []
    for (_, before, _), (number, at, _) in itertools.pairwise(rows):
        if at - before != period:
            raise TraceError(
                f"{path}:{number}: {at.isoformat()} is {(at - before).total_seconds():g} s after the previous row, "
                f"expected {period.total_seconds():g} s (fill missing periods with 0)"
            )
    for _, _, count in rows:
        share, rest = divmod(round(count), minutes)
        requests += [share + (1 if i < rest else 0) for i in range(minutes)]
    return Trace(rows[0][1], tuple(requests))


def write_csv(trace: Trace, path: Path, *, minutes_per_row: int = 1) -> Path:
    """Write ``trace`` as :func:`load_csv` reads it: ``time,requests`` rows in UTC, each the sum of its minutes.

    Only the arrivals are written: replayed, a trace gets its calendar windows back from the calendar
    (``calendar_windows``), not the scenario's widened ones or its unannounced spikes.

    Raises
    ------
    ValueError
        When ``minutes_per_row`` does not divide the trace into whole rows.
    """
    if minutes_per_row < 1 or len(trace) % minutes_per_row:
        raise ValueError(f"{len(trace)} minutes do not make whole rows of {minutes_per_row} minutes")
    start = trace.start.astimezone(UTC)
    rows = [
        f"{start + first * TICK:%Y-%m-%dT%H:%M:%SZ},{sum(trace.requests[first : first + minutes_per_row])}"
        for first in range(0, len(trace), minutes_per_row)
    ]
    path.write_text("time,requests\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path
