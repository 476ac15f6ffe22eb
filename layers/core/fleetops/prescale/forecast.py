"""Demand forecast from a variant's own history: a seasonal (same slot of past weeks) median with a weekly trend.

The model, in five lines:

1. *Everyday demand*: the history with every calendar event window cut out and bridged by a straight line
   between the slots on either side, so release nights never inflate the baseline (:func:`everyday`).
2. *Trend*: the week-over-week ratio of mean everyday demand, the median of the ratios of consecutive whole
   weeks, clamped to ``[1/MAX_WEEKLY_GROWTH, MAX_WEEKLY_GROWTH]`` (:func:`weekly_growth`).
3. *Forecast* of a slot: the median, over the past weeks that hold it, of the same slot's everyday demand k
   weeks ago times ``growth ** k`` (:func:`forecast`). One unannounced spike in one week is outvoted by the
   others; with fewer weeks the median is a mean.
4. *Today's level*: where the last two hours ran more than 10 % below their forecast (a holiday, a level that
   wanders from week to week), the forecast of the hours ahead is lowered by that ratio, fading back to the
   seasonal forecast over the day (:func:`recent_slots`, :func:`level_ratio`, :func:`corrected`); where they ran
   more than 11 % above it, the planner sizes the events ahead up by it (everyday traffic above the forecast is
   what target tracking serves). Only past the noise: a forecast nudged by every noisy hour would hold too
   little as often as too much.
5. *Time of day*: where the hour around a time of day ran more than 10 % below its forecast on each of the last
   two days that had no calendar event then (the humps moved, an afternoon fell away), the everyday forecast of
   that time is lowered by the lesser of the two ratios (:func:`time_of_day_ratios`). The seasonal median alone
   would hold the old shape for weeks; one quiet day (a holiday) cuts nothing.

Why not a library: statsmodels or Prophet would bring numpy, scipy and pandas (well over 100 MB and seconds of
cold start) into a Lambda layer that holds pydantic and PyYAML; the model above is a few dozen lines a person can
check by hand, and it is what the planner needs (a robust level per five minutes for the week ahead, not
intervals). EC2 Auto Scaling's predictive scaling makes the same choice of inputs (the group's own last weeks).

Everything is pure: a :class:`DemandSeries` in, numbers out. Slots are ``SLOT_S`` seconds, aligned to the epoch.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

SLOT_S = 300  # CloudWatch keeps 5-minute datapoints for 63 days (1-minute ones for 15): one period for all history
SLOT = timedelta(seconds=SLOT_S)
WEEK = timedelta(days=7)
SLOTS_PER_WEEK = int(WEEK / SLOT)
MAX_WEEKLY_GROWTH = 1.5  # a forecast that follows a trend, not one that explodes from two noisy weeks
#: Today's level is read from this window of whole slots, ending ``METRIC_LAG`` before now: SageMaker's
#: Invocations reach CloudWatch a minute or more late, and a slot not yet in reads as no traffic.
RECENT = timedelta(hours=2)
METRIC_LAG = timedelta(minutes=10)
#: Fewer comparable slots than this in the window (events, an empty history): no correction.
MIN_RECENT_SLOTS = 12
#: A correction fades over the hours ahead with this e-folding time: a quiet morning says something about the
#: afternoon, little about tomorrow.
LEVEL_MEMORY = timedelta(hours=6)
#: A ratio from this to its inverse is noise (two hours of 5-minute slots at this project's traffic vary by a
#: few %).
LEVEL_DEADBAND = 0.9
#: The largest cut: a quiet spell never lowers the forecast below half.
MIN_LEVEL_RATIO = 0.5
#: The largest rise believed (a level above the expected one sizes up the events ahead).
MAX_LEVEL_RATIO = 3.0
#: A time of day is judged on its last this many days: a forecast that overshot every one of them at that local
#: time is cut there (the humps moved, that part of the day fell away); one quiet day (a holiday) cuts nothing.
TIME_OF_DAY_DAYS = 2
#: ... over this many slots centred on the time (an hour), so that one noisy slot does not decide.
TIME_OF_DAY_SLOTS = 13
#: The largest cut of a time of day (seen on every one of its last days, it may cut deeper than one quiet spell).
MIN_TIME_OF_DAY_RATIO = 0.25
#: How far back those days are looked for (calendar events are passed over).
LOOK_BACK_DAYS = 9

Span = tuple[datetime, datetime]


def floor_slot(at: datetime) -> datetime:
    """The start of the slot ``at`` falls in.

    Examples
    --------
    >>> floor_slot(datetime(2026, 12, 4, 10, 7, 31, tzinfo=UTC)).isoformat()
    '2026-12-04T10:05:00+00:00'
    """
    seconds = int(at.timestamp())
    return datetime.fromtimestamp(seconds - seconds % SLOT_S, tz=UTC)


@dataclass(frozen=True)
class DemandSeries:
    """Requests per second in each slot from ``start``; ``None`` where nothing was recorded yet (before the first
    datapoint). ``start`` is slot-aligned UTC."""

    start: datetime
    rps: tuple[float | None, ...]

    def __post_init__(self) -> None:
        if self.start != floor_slot(self.start):
            raise ValueError(f"series start {self.start.isoformat()} is not aligned to {SLOT_S} s")

    @property
    def end(self) -> datetime:
        return self.start + len(self.rps) * SLOT

    def index(self, at: datetime) -> int:
        return (at - self.start) // SLOT

    def at(self, when: datetime) -> float | None:
        i = self.index(when)
        return self.rps[i] if 0 <= i < len(self.rps) and when >= self.start else None

    def days_recorded(self) -> float:
        """Days from the first recorded slot to the end of the series."""
        first = next((i for i, v in enumerate(self.rps) if v is not None), None)
        return 0.0 if first is None else (len(self.rps) - first) * SLOT_S / 86400


def everyday(series: DemandSeries, events: Sequence[Span]) -> DemandSeries:
    """The series with every slot that touches an event span replaced by a line between its neighbours.

    A masked run at the end of the series holds the last everyday value; one at the start holds the first.

    Examples
    --------
    >>> t0 = datetime(2026, 12, 4, tzinfo=UTC)
    >>> s = DemandSeries(t0, (1.0, 2.0, 9.0, 9.0, 5.0))
    >>> everyday(s, [(t0 + 2 * SLOT, t0 + 4 * SLOT)]).rps  # the two 9s were a release night
    (1.0, 2.0, 3.0, 4.0, 5.0)
    """
    values = list(series.rps)
    masked = [False] * len(values)
    for start, end in events:
        first = max(0, series.index(floor_slot(start)))
        last = min(len(values), series.index(floor_slot(end - timedelta(microseconds=1))) + 1)
        for i in range(first, last):
            masked[i] = values[i] is not None
    i = 0
    while i < len(values):
        if not masked[i]:
            i += 1
            continue
        j = i
        while j < len(values) and masked[j]:
            j += 1
        before = values[i - 1] if i > 0 else None
        after = values[j] if j < len(values) else None
        for k in range(i, j):
            if before is not None and after is not None:
                values[k] = before + (after - before) * (k - i + 1) / (j - i + 1)
            else:
                values[k] = before if before is not None else after
        i = j
    return DemandSeries(series.start, tuple(values))


def weekly_growth(series: DemandSeries) -> float:
    """Median ratio of each whole week's mean demand to the week before it, counting back from the series' end
    (1.0 with fewer than two whole weeks).

    Examples
    --------
    >>> weeks = (1.0,) * SLOTS_PER_WEEK + (1.1,) * SLOTS_PER_WEEK + (1.21,) * SLOTS_PER_WEEK
    >>> round(weekly_growth(DemandSeries(datetime(2026, 12, 7, tzinfo=UTC), weeks)), 3)
    1.1
    """
    means = []
    for k in range(1, len(series.rps) // SLOTS_PER_WEEK + 1):
        begin = series.index(series.end - k * WEEK)
        if begin < 0:
            break
        week = series.rps[begin : begin + SLOTS_PER_WEEK]
        if len(week) < SLOTS_PER_WEEK or any(v is None for v in week):
            break
        means.append(statistics.fmean(v for v in week if v is not None))
    ratios = [newer / older for newer, older in itertools.pairwise(means) if older > 0]
    if not ratios:
        return 1.0
    return min(MAX_WEEKLY_GROWTH, max(1 / MAX_WEEKLY_GROWTH, statistics.median(ratios)))


def weeks_before(slot: datetime, weeks: int, zone: tzinfo = UTC) -> datetime:
    """``slot`` ``weeks`` weeks earlier by the clocks of ``zone`` (UTC): across a daylight-saving change, an hour
    more or less than ``weeks`` x 168 hours, so that the same local hour of past weeks is compared.

    Examples
    --------
    >>> from zoneinfo import ZoneInfo
    >>> la = ZoneInfo("America/Los_Angeles")
    >>> monday = datetime(2026, 3, 9, 16, tzinfo=UTC)  # 09:00 in Los Angeles, the day after the clocks went forward
    >>> print(weeks_before(monday, 1, la))  # 09:00 a week earlier, still winter time
    2026-03-02 17:00:00+00:00
    >>> print(weeks_before(monday, 1))
    2026-03-02 16:00:00+00:00
    """
    if zone is UTC:
        return slot - weeks * WEEK
    return (slot.astimezone(zone) - weeks * WEEK).astimezone(UTC)


def days_before(slot: datetime, days: int, zone: tzinfo = UTC) -> datetime:
    """``slot`` ``days`` days earlier at the same local time of ``zone`` (see :func:`weeks_before`)."""
    if zone is UTC:
        return slot - timedelta(days=days)
    return (slot.astimezone(zone) - timedelta(days=days)).astimezone(UTC)


#: How often :func:`_steady_clock` reads a zone's offset: no zone changes its clocks twice within six hours.
_OFFSET_PROBE = timedelta(hours=6)


def _steady_clock(zone: tzinfo, start: datetime, end: datetime) -> tzinfo:
    """UTC where ``zone`` keeps one offset from ``start`` to ``end`` (most plans: the same local time days or weeks
    earlier is then the same UTC time, without two time-zone conversions per slot and day); else ``zone``.

    Examples
    --------
    >>> from zoneinfo import ZoneInfo
    >>> march = datetime(2026, 3, 1, tzinfo=UTC)
    >>> _steady_clock(ZoneInfo("Asia/Tokyo"), march, march + 5 * WEEK)
    datetime.timezone.utc
    >>> _steady_clock(ZoneInfo("America/Los_Angeles"), march, march + 5 * WEEK)  # the clocks go forward on the 8th
    zoneinfo.ZoneInfo(key='America/Los_Angeles')
    """
    if zone is UTC:
        return zone
    probes = int((end - start) / _OFFSET_PROBE) + 2
    offsets = {min(start + i * _OFFSET_PROBE, end).astimezone(zone).utcoffset() for i in range(probes)}
    return UTC if len(offsets) == 1 else zone


def forecast(
    series: DemandSeries, now: datetime, slots: Sequence[datetime], growth: float = 1.0, zone: tzinfo = UTC
) -> list[float | None]:
    """Expected everyday demand (requests/s) of each slot in ``slots`` (all at or after ``now``).

    The median over past weeks k = 1, 2, ... of ``series`` at the slot's local time in ``zone`` k weeks earlier
    (:func:`weeks_before`) times ``growth ** k``, using only history before ``now``; ``None`` for a slot no past
    week holds.

    Examples
    --------
    Three past weeks held 10, 12 and 30 requests/s at this slot (the 30 an unannounced spike):

    >>> now = datetime(2026, 12, 28, tzinfo=UTC)
    >>> week = [0.0] * SLOTS_PER_WEEK
    >>> history = DemandSeries(now - 3 * WEEK, tuple([30.0] + week[1:] + [12.0] + week[1:] + [10.0] + week[1:]))
    >>> forecast(history, now, [now])
    [12.0]
    >>> forecast(history, now, [now], growth=1.1)  # median of 10 x 1.1, 12 x 1.21, 30 x 1.331
    [14.52]
    """
    # Slots before ``limit`` have ended by now; nothing at or after it is read.
    limit = min(len(series.rps), int((now - series.start).total_seconds()) // SLOT_S)
    zone = _steady_clock(zone, series.start, max(slots, default=now))
    found: list[float | None] = []
    for slot in slots:
        seen = []
        k = 1
        while (past := series.index(weeks_before(slot, k, zone))) >= 0:
            value = series.rps[past] if past < limit else None
            if value is not None:
                seen.append(value * growth**k)
            k += 1
        found.append(round(statistics.median(seen), 6) if seen else None)
    return found


def recent_slots(now: datetime, skip: Sequence[Span] = ()) -> list[datetime]:
    """The whole slots today's level is read from: ``[now - METRIC_LAG - RECENT, now - METRIC_LAG)``, less those
    touching a span of ``skip`` (calendar events: their traffic is not the everyday level).

    Examples
    --------
    >>> now = datetime(2026, 12, 28, 12, 3, tzinfo=UTC)
    >>> slots = recent_slots(now)
    >>> len(slots), f"{slots[0]:%H:%M}", f"{slots[-1]:%H:%M}"  # two hours to 11:50, at least 10 minutes ago
    (24, '09:50', '11:45')
    >>> len(recent_slots(now, skip=[(now - timedelta(hours=1), now)]))  # 11:00 on an event: 09:50 to 10:55 left
    14
    """
    end = floor_slot(now - METRIC_LAG)
    window = [end - (i + 1) * SLOT for i in reversed(range(int(RECENT / SLOT)))]
    return [s for s in window if not any(s < stop and s + SLOT > begin for begin, stop in skip)]


def level_ratio(actual: DemandSeries, slots: Sequence[datetime], expected: Sequence[float | None]) -> float:
    """How far below or above what was expected of ``slots`` the variant served in them (1.0: within noise, or
    too little to say).

    The ratio of the recorded requests to the expected ones over the slots that have both; 1.0 with fewer than
    ``MIN_RECENT_SLOTS`` such slots, or from ``LEVEL_DEADBAND`` to its inverse, and within
    ``[MIN_LEVEL_RATIO, MAX_LEVEL_RATIO]``. ``expected`` is the forecast of each slot (from the weeks
    before it), or the configured level where the history is too short to forecast from.

    Examples
    --------
    A day at 6 requests/s where 10 were expected, then one at 9.2 (noise), then one with too few slots to say:

    >>> t0 = datetime(2026, 12, 28, tzinfo=UTC)
    >>> slots = [t0 + i * SLOT for i in range(24)]
    >>> level_ratio(DemandSeries(t0, (6.0,) * 24), slots, [10.0] * 24)
    0.6
    >>> level_ratio(DemandSeries(t0, (9.2,) * 24), slots, [10.0] * 24)
    1.0
    >>> level_ratio(DemandSeries(t0, (6.0,) * 24), slots, [None] * 13 + [10.0] * 11)
    1.0
    >>> level_ratio(DemandSeries(t0, (25.0,) * 24), slots, [10.0] * 24)
    2.5
    >>> level_ratio(DemandSeries(t0, (10.8,) * 24), slots, [10.0] * 24)  # 8 % above: noise
    1.0
    """
    pairs: list[tuple[float, float]] = []
    for slot, wanted in zip(slots, expected, strict=True):
        seen = actual.at(slot)
        if seen is not None and wanted is not None:
            pairs.append((seen, wanted))
    return _beyond_noise(sum(seen for seen, _ in pairs), sum(wanted for _, wanted in pairs), len(pairs))


def _beyond_noise(seen: float, wanted: float, pairs: int, lowest: float = MIN_LEVEL_RATIO) -> float:
    """``seen / wanted`` clamped to ``[lowest, MAX_LEVEL_RATIO]``; 1.0 within ``LEVEL_DEADBAND`` of 1, or from fewer
    than ``MIN_RECENT_SLOTS`` slots."""
    if pairs < MIN_RECENT_SLOTS or wanted <= 0:
        return 1.0
    ratio = seen / wanted
    if LEVEL_DEADBAND <= ratio <= 1 / LEVEL_DEADBAND:
        return 1.0
    return round(min(MAX_LEVEL_RATIO, max(lowest, ratio)), 6)


def corrected(rps: float, ratio: float, slot: datetime, now: datetime) -> float:
    """``rps`` forecast for ``slot`` times today's level ``ratio``, faded by how far ahead of ``now`` it lies.

    Examples
    --------
    >>> now = datetime(2026, 12, 28, tzinfo=UTC)
    >>> corrected(10.0, 0.6, now, now)  # now: the whole ratio
    6.0
    >>> round(corrected(10.0, 0.6, now + LEVEL_MEMORY, now), 2)  # 6 hours ahead: 0.6 ** (1 / e)
    8.29
    >>> round(corrected(10.0, 0.6, now + 2 * LEVEL_MEMORY, now), 2)  # 12 hours ahead: 0.6 ** (1 / e ** 2)
    9.33
    >>> round(corrected(10.0, 0.6, now + 8 * LEVEL_MEMORY, now), 2)  # two days ahead: none left to see
    10.0
    """
    ahead = max(0.0, (slot - now) / LEVEL_MEMORY)
    return rps * math.pow(ratio, math.exp(-ahead))


def time_of_day_ratios(
    usual: DemandSeries,
    now: datetime,
    slots: Sequence[datetime],
    growth: float = 1.0,
    zone: tzinfo = UTC,
    skip: Sequence[Span] = (),
) -> list[float]:
    """Per slot of ``slots``: below 1, how far under their forecast the everyday demand of the same local time ran
    on each of its last ``TIME_OF_DAY_DAYS`` recorded days (the least of those cuts); 1.0 within noise
    (``LEVEL_DEADBAND``), or with fewer such days in the ``LOOK_BACK_DAYS`` before. Never below
    ``MIN_TIME_OF_DAY_RATIO``.

    Each day is read as :func:`level_ratio` reads today's level, over ``TIME_OF_DAY_SLOTS`` slots around that time
    that ended ``METRIC_LAG`` before ``now``, each against its forecast from the weeks before it; a day whose
    slots touch a span of ``skip`` (a calendar event: bridged over in ``usual``, it says nothing) is passed over.

    Examples
    --------
    Three weeks at 10 requests/s, then two days at 6 from noon to 18:00 (the afternoon fell away):

    >>> now = datetime(2026, 12, 28, 12, tzinfo=UTC)
    >>> start = now - 3 * WEEK
    >>> rps = [10.0] * int((now - start) / SLOT)
    >>> noon = [int((now - timedelta(days=day) - start) / SLOT) for day in (1, 2)]
    >>> for first in noon:
    ...     rps[first : first + 72] = [6.0] * 72
    >>> time_of_day_ratios(DemandSeries(start, tuple(rps)), now, [now + timedelta(hours=3), now + timedelta(hours=9)])
    [0.6, 1.0]
    >>> rps[noon[1] : noon[1] + 72] = [10.0] * 72  # the day before was as usual: yesterday was a quiet day
    >>> time_of_day_ratios(DemandSeries(start, tuple(rps)), now, [now + timedelta(hours=3)])
    [1.0]
    """
    done = floor_slot(now - METRIC_LAG)  # slots before it have ended and reached CloudWatch
    zone = _steady_clock(zone, usual.start, max(slots, default=now))
    half = TIME_OF_DAY_SLOTS // 2
    oldest = done - timedelta(days=LOOK_BACK_DAYS + 1)
    events = [(begin, stop) for begin, stop in skip if stop > oldest and begin < done]
    centres: list[list[datetime]] = []
    for slot in slots:
        found: list[datetime] = []
        for day in range(1, LOOK_BACK_DAYS + 1):
            centre = days_before(slot, day, zone)
            low, high = centre - half * SLOT, centre + (half + 1) * SLOT
            if high <= done and not any(low < stop and high > begin for begin, stop in events):
                found.append(centre)
                if len(found) == TIME_OF_DAY_DAYS:
                    break
        centres.append(found if len(found) == TIME_OF_DAY_DAYS else [])
    # Every window's slots, as indices into ``usual``; running sums over them give each window's totals in O(1).
    lows = {usual.index(c) - half for days in centres for c in days}
    needed = sorted({low + i for low in lows for i in range(TIME_OF_DAY_SLOTS)})
    expected = dict(
        zip(needed, forecast(usual, now, [usual.start + i * SLOT for i in needed], growth, zone), strict=True)
    )
    first = needed[0] if needed else 0
    seen, wanted, pairs = [0.0], [0.0], [0]
    for i in range(first, needed[-1] + 1 if needed else 0):
        actual = usual.rps[i] if 0 <= i < len(usual.rps) else None
        guess = expected.get(i)
        both = actual is not None and guess is not None
        seen.append(seen[-1] + (actual or 0.0) * both)
        wanted.append(wanted[-1] + (guess or 0.0) * both)
        pairs.append(pairs[-1] + both)

    def day_ratio(centre: datetime) -> float:
        low = usual.index(centre) - half - first
        high = low + TIME_OF_DAY_SLOTS
        totals = (seen[high] - seen[low], wanted[high] - wanted[low], pairs[high] - pairs[low])
        return _beyond_noise(*totals, lowest=MIN_TIME_OF_DAY_RATIO)

    return [min(1.0, max(day_ratio(c) for c in days)) if days else 1.0 for days in centres]
