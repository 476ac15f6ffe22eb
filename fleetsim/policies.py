"""The policies the simulator compares, each driven by the project's own decision code (one module each).

- :class:`TargetTracking`: Application Auto Scaling's target tracking on ``InvocationsPerInstance`` with the
  template's target and cooldowns (``fleetsim.stack``), approximated as AWS documents it: scale out after 3
  one-minute datapoints above the target, scale in after 15 below 90 % of it, to ``ceil(invocations / target)``.
- :class:`CalendarPrescale`: the pre-scale reconciler itself (``fleetops.prescale.reconciler.reconcile``) on the
  template's schedule, writing to an in-memory Application Auto Scaling whose scheduled actions fire on time.
- :class:`AlarmResponse`: the playbook's alarms evaluated on the simulated metrics (queue depth from the
  simulated queue) and, on each transition, the alarm responder's decision core
  (``fleetops.remediation.decide.decide``) with its rails; its ``go`` scale-outs are applied.

``reactive`` is target tracking alone; ``project`` is all three, as a deployed stack runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from fleetsim.fleet import Minute, Policy, Scaler
from fleetsim.prescale import CalendarPrescale
from fleetsim.responder import AlarmResponse
from fleetsim.tracking import TargetTracking

__all__ = ["AlarmResponse", "CalendarPrescale", "Combined", "TargetTracking"]


@dataclass
class Combined:
    """Several policies on one scalable target, in order (as the deployed stack's parts act on the same target)."""

    name: str
    parts: Sequence[Policy]

    def before(self, at: datetime, scaler: Scaler) -> None:
        for part in self.parts:
            part.before(at, scaler)

    def after(self, minute: Minute, scaler: Scaler) -> None:
        for part in self.parts:
            part.after(minute, scaler)
