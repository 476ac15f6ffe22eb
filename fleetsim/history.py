"""A simulated CloudWatch for the pre-scale reconciler: the trace's own ``Invocations``, up to the simulated now.

The reconciler reads its forecast's history through :class:`~fleetops.prescale.demand_history.DemandHistory`;
this subclass answers from the trace instead of GetMetricData, in the same five-minute sums, and refuses to
answer past the simulated clock, so no simulated decision can see the future.
"""

from __future__ import annotations

from datetime import datetime

from fleetops.prescale.demand_history import DemandHistory
from fleetops.prescale.forecast import SLOT, SLOT_S, DemandSeries, floor_slot
from fleetsim.traffic import TICK, Trace


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
