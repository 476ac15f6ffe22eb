"""The policies the simulator compares, each driven by the project's own decision code (one module each).

- :class:`TargetTracking`: Application Auto Scaling's target tracking with the template's metric (high-resolution
  concurrency per instance), target and cooldowns (``fleetsim.stack``), approximated as AWS documents it.
- :class:`CalendarPrescale`: the pre-scale reconciler itself (``fleetops.prescale.reconciler.reconcile``) on the
  template's schedule, writing to an in-memory Application Auto Scaling whose scheduled actions fire on time and
  reading its forecast's history from a simulated CloudWatch that ends at the simulated now.
- :class:`AlarmResponse`: the playbook's alarms evaluated on the simulated metrics (queue depth from the
  simulated queue) and, on each transition, the alarm responder's decision core
  (``fleetops.remediation.decide.decide``) with its rails; its ``go`` scale-outs are applied, stepped from the
  serving count, and released to the plan's level once their alarms have been OK for the hold.

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
