"""Event sizes learned from an entry's own past occurrences, instead of the multiplier someone once configured.

For each past occurrence the history holds, the traffic in the entry's window (widened by ``EARLY`` before its
start, for people who arrive early, and ``LATE`` after its end) is divided slot by slot by the everyday demand of
the same slots (:func:`fleetops.prescale.forecast.everyday`, the line bridging the window). The learned *profile*
is, per slot of the window, the largest of those ratios over the last ``MAX_OCCURRENCES`` occurrences, never below
1 (an event never lowers capacity). Its peak is the learned size; the first slot at least half-way up to the peak
says how early the traffic arrives.

A one-off entry has no past occurrences and keeps its configured multiplier; so does an entry with fewer than
``min_occurrences`` occurrences in the history (a new entry, a yearly one the history does not reach back to).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from fleetops.calendar import Occurrence
from fleetops.prescale.forecast import SLOT, DemandSeries, floor_slot
from fleetops.validation import StrictModel

EARLY = timedelta(minutes=60)
LATE = timedelta(minutes=30)
MAX_OCCURRENCES = 4


class EventSize(StrictModel):
    """One calendar entry's configured and learned size, and which of the two the plan used."""

    name: str
    kind: str
    configured: float
    learned: float | None = None
    occurrences: int = 0
    early_minutes: int = 0
    used: Literal["learned", "configured"] = "configured"
    why: str = ""


@dataclass(frozen=True)
class Profile:
    """Traffic over everyday demand, per slot from ``EARLY`` before an occurrence's start."""

    ratios: tuple[float, ...]

    def multiplier(self, occurrence: Occurrence, slot: datetime) -> float:
        """The ratio for ``slot`` of a future ``occurrence`` (1.0 outside its widened window)."""
        if not occurrence.start - EARLY <= slot < occurrence.end + LATE:
            return 1.0
        offset = int((slot - window_start(occurrence)) / SLOT)
        if offset < len(self.ratios):
            return self.ratios[offset]
        return max(self.ratios) if slot < occurrence.end else 1.0  # a longer occurrence than those learned from


def window_start(occurrence: Occurrence) -> datetime:
    return floor_slot(occurrence.start - EARLY)


def _ratios(occurrence: Occurrence, actual: DemandSeries, baseline: DemandSeries) -> list[float] | None:
    first = window_start(occurrence)
    slots = int((occurrence.end + LATE - first) / SLOT)
    ratios = []
    for i in range(slots):
        slot = first + i * SLOT
        seen, usual = actual.at(slot), baseline.at(slot)
        if seen is None or usual is None:
            return None  # the history does not hold the whole window
        ratios.append(seen / usual if usual > 0 else 1.0)
    return ratios


def learn(
    name: str,
    kind: str,
    configured: float,
    past: Sequence[Occurrence],
    actual: DemandSeries,
    baseline: DemandSeries,
    min_occurrences: int,
) -> tuple[EventSize, Profile | None]:
    """The entry's size from its ``past`` occurrences (those that ended before the history did), newest first.

    Examples
    --------
    Two past Fridays at 10 requests/s everyday: the first peaked at 25, the second at 30 and rose 10 minutes early.

    >>> from datetime import UTC
    >>> from fleetops.prescale.forecast import everyday
    >>> t0 = datetime(2026, 11, 6, 10, tzinfo=UTC)
    >>> def friday(start):
    ...     return Occurrence(name="simulpub", start=start, end=start + timedelta(minutes=30), multiplier=2.5,
    ...                       reason="", timezone="UTC", endpoints=(), kind="recurring")
    >>> weeks = [friday(t0), friday(t0 + timedelta(days=7))]
    >>> rps = [10.0] * (14 * 288)
    >>> for week, peak in ((0, 25.0), (1, 30.0)):
    ...     start = week * 7 * 288 + 12  # the event's first slot: one hour after the series start
    ...     rps[start - 2 : start + 6] = [20.0, 20.0] + [peak] * 6
    >>> history = DemandSeries(t0 - timedelta(hours=1), tuple(rps))
    >>> usual = everyday(history, [(o.start - EARLY, o.end + LATE) for o in weeks])
    >>> size, profile = learn("simulpub", "recurring", 2.5, weeks, history, usual, 2)
    >>> size.learned, size.early_minutes, size.used
    (3.0, 10, 'learned')
    """
    held = [occ for occ in past if occ.end + LATE <= actual.end]
    learned = [r for occ in sorted(held, key=lambda o: o.start, reverse=True) if (r := _ratios(occ, actual, baseline))]
    learned = learned[:MAX_OCCURRENCES]
    size = EventSize(name=name, kind=kind, configured=configured, occurrences=len(learned))
    if kind == "one_off":
        return size.model_copy(update={"why": "a one-off entry has no past occurrences"}), None
    if len(learned) < min_occurrences:
        why = f"{len(learned)} past occurrence(s) in the history, {min_occurrences} needed"
        return size.model_copy(update={"why": why}), None
    length = min(len(r) for r in learned)
    profile = Profile(tuple(round(max(1.0, *(r[i] for r in learned)), 3) for i in range(length)))
    peak = max(profile.ratios)
    half_way = next(i for i, r in enumerate(profile.ratios) if r >= 1 + (peak - 1) / 2)
    early = max(0, int((EARLY - half_way * SLOT) / timedelta(minutes=1))) if peak >= 1.1 else 0
    why = f"peak over everyday demand in the last {len(learned)} occurrence(s)"
    update = {"learned": round(peak, 2), "early_minutes": early, "used": "learned", "why": why}
    return size.model_copy(update=update), profile
