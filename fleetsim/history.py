"""A simulated CloudWatch for the pre-scale reconciler: the trace's own ``Invocations``, up to the simulated now,
and what the simulated instances served (``InvocationsPerInstance``, ``QueueDepth``) in the minutes played so far.

The reconciler reads its history through :class:`~fleetops.prescale.demand_history.DemandHistory`; this subclass
answers from the trace and the played minutes instead of GetMetricData, in the same periods, and refuses
to answer past the simulated clock, so no simulated decision can see the future. The trace's history weeks were
served by no simulated fleet, so they hold demand but no per-instance figures.
"""

from __future__ import annotations

import bisect
from datetime import datetime

from fleetops.prescale.demand_history import DemandHistory
from fleetops.prescale.forecast import SLOT, SLOT_S, DemandSeries, floor_slot
from fleetops.prescale.served_capacity import MinuteLoad
from fleetsim.fleet import Minute
from fleetsim.traffic import TICK, TICK_S, Trace


class FutureReadError(AssertionError):
    """A simulated decision asked for history past the simulated now."""


class SimulatedHistory(DemandHistory):
    """Per-variant ``Invocations`` from ``trace``; :attr:`now` is the simulated clock, set before each run."""

    def __init__(self, trace: Trace) -> None:  # no client: nothing here leaves the process
        self.trace = trace
        self.now = trace.start
        self.latest_read: datetime | None = None  # the end of the newest slot ever returned
        # Whole slots only: the first starts at or after the trace's first minute.
        aligned = floor_slot(trace.start)
        self._first = aligned if aligned == trace.start else aligned + SLOT
        skip = int((self._first - trace.start) / TICK)
        per_slot = int(SLOT / TICK)
        minutes = trace.requests[skip:]
        self._rps = [sum(minutes[i : i + per_slot]) / SLOT_S for i in range(0, len(minutes) - per_slot + 1, per_slot)]
        self._kept: list[Minute] = []  # the played minutes with a queue, and the minutes either side of them
        self._last: Minute | None = None

    def record(self, minute: Minute) -> None:
        """A minute the simulated fleet has just served (its metrics reach CloudWatch).

        Only minutes with a queue and their neighbours (the queue's growth is read across them) are kept: the rest
        weigh nothing in the served rate, and a fortnight of them read on every run would cost more than the rest
        of the simulation."""
        last, self._last = self._last, minute
        last_kept = bool(self._kept) and self._kept[-1] is last
        if minute.queued > 0:
            if last is not None and not last_kept:
                self._kept.append(last)
            self._kept.append(minute)
        elif last is not None and last_kept and last.queued > 0:
            self._kept.append(minute)

    def invocations(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> DemandSeries:
        if end > self.now:
            raise FutureReadError(f"history to {end.isoformat()} asked for at {self.now.isoformat()}")
        first, last = floor_slot(start), floor_slot(end)
        rps: list[float | None] = []
        for i in range(int((first - self._first) / SLOT), int((last - self._first) / SLOT)):
            rps.append(self._rps[i] if 0 <= i < len(self._rps) else None)
        held = [i for i, v in enumerate(rps) if v is not None]
        if held:
            newest = first + (held[-1] + 1) * SLOT
            self.latest_read = newest if self.latest_read is None else max(self.latest_read, newest)
        return DemandSeries(first, tuple(rps))

    def minute_loads(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> list[MinuteLoad]:
        if end > self.now:
            raise FutureReadError(f"minute loads to {end.isoformat()} asked for at {self.now.isoformat()}")
        return [
            MinuteLoad(m.at, m.invocations_per_instance / TICK_S, m.queue_per_instance)
            for m in self._kept[bisect.bisect_left(self._kept, start, key=lambda m: m.at) :]
            if m.at + TICK <= end
        ]
