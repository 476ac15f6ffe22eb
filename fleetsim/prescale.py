"""The pre-scale reconciler itself (``fleetops.prescale.reconciler.reconcile``) on the template's schedule, writing to
an in-memory Application Auto Scaling whose scheduled actions fire on time, and reading its forecast's history from a
simulated CloudWatch that holds the trace up to the simulated now (``fleetsim.history``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleetops.audit import AuditRecord
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.switches import KillSwitch
from fleetops.capacity import ScalableTarget, ScheduledAction
from fleetops.config import EndpointConfig, FleetConfig
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.models import Plan
from fleetops.prescale.reconciler import PrescaleDeps, reconcile
from fleetsim.fleet import Minute, Scaler
from fleetsim.history import SimulatedHistory


class SimulatedAutoScaling(AutoScaling):
    """Application Auto Scaling for one simulated variant: the scalable target is the :class:`Scaler`."""

    def __init__(self, scaler: Scaler) -> None:  # no client: nothing here leaves the process
        self.scaler = scaler
        self.actions: dict[str, ScheduledAction] = {}
        self.runs_at: dict[str, datetime | None] = {}
        self.fired: set[str] = set()

    def get_target(self, endpoint_name: str, variant_name: str) -> ScalableTarget | None:
        return ScalableTarget(min_capacity=self.scaler.min_capacity, max_capacity=self.scaler.max_capacity)

    def set_capacity(self, endpoint_name: str, variant_name: str, min_capacity: int, max_capacity: int) -> None:
        self.scaler.set_range(min_capacity, max_capacity)

    def list_scheduled_actions(self, endpoint_name: str, variant_name: str, prefix: str) -> list[ScheduledAction]:
        return [a for name, a in sorted(self.actions.items()) if name.startswith(prefix)]

    def put_scheduled_action(self, action: ScheduledAction) -> None:
        self.actions[action.name] = action
        self.runs_at[action.name] = action.runs_at()  # parsed once, not every simulated minute
        self.fired.discard(action.name)

    def delete_scheduled_action(self, action: ScheduledAction) -> None:
        self.actions.pop(action.name, None)
        self.runs_at.pop(action.name, None)

    def fire_due(self, at: datetime) -> None:
        """Run every one-time action whose time has come, in time order, as Application Auto Scaling does."""
        due = [
            (when, self.actions[name])
            for name, when in self.runs_at.items()
            if when is not None and when <= at and name not in self.fired
        ]
        for _, action in sorted(due, key=lambda pair: pair[0]):
            self.scaler.set_range(action.min_capacity, action.max_capacity)
            self.fired.add(action.name)


class _Rows(CalendarTable):
    def __init__(self, rows: Sequence[dict[str, Any]]) -> None:
        self.rows = list(rows)

    def one_off_entries(self) -> list[dict[str, Any]]:
        return list(self.rows)


class _NoAudit(AuditTable):
    def __init__(self) -> None:
        pass

    def write(self, record: AuditRecord) -> AuditRecord:
        return record

    def append_once(self, record: AuditRecord) -> bool:
        return True


class _Released(KillSwitch):
    def __init__(self) -> None:
        pass

    def engaged(self) -> bool:
        return False


@dataclass
class CalendarPrescale:
    """The reconciler every ``interval_s`` (EventBridge Scheduler), the scheduled actions at their times."""

    config: FleetConfig
    endpoint: EndpointConfig
    one_off_rows: Sequence[dict[str, Any]]
    interval_s: int
    history: SimulatedHistory | None = None  # None: the reconciler plans from the configured levels
    name: str = "calendar pre-scaling"
    scheduled_actions_max: int = 0  # the most scheduled actions the reconciler kept at once
    last_plan: Plan | None = None
    _autoscaling: SimulatedAutoScaling | None = None
    _next_run: datetime | None = None
    _now: datetime | None = None

    def __post_init__(self) -> None:
        self._simulated = self.config.model_copy(update={"endpoints": (self.endpoint,)})  # this endpoint only

    def before(self, at: datetime, scaler: Scaler) -> None:
        if self._autoscaling is None:
            self._autoscaling = SimulatedAutoScaling(scaler)
        self._autoscaling.fire_due(at)
        self._now = at
        if self._next_run is None or at >= self._next_run:
            if self.history is not None:
                self.history.now = at
            deps = PrescaleDeps(
                self._autoscaling, _Rows(self.one_off_rows), _NoAudit(), _Released(), history=self.history
            )
            self.last_plan = reconcile(self._simulated, deps, now=at, trigger="schedule", dry_run=False)
            self.scheduled_actions_max = max(self.scheduled_actions_max, len(self._autoscaling.actions))
            self._next_run = at + timedelta(seconds=self.interval_s)

    def plan_level(self) -> int | None:
        """The MinCapacity the last plan sets for the simulated now (the level a released raise returns to)."""
        if self.last_plan is None or not self.last_plan.variants or self._now is None:
            return None
        variant = self.last_plan.variants[0]
        level = variant.current_min_capacity
        for step in variant.timeline:
            if step.at <= self._now:
                level = step.min_capacity
        return level

    def after(self, minute: Minute, scaler: Scaler) -> None:
        if self.history is not None:
            self.history.record(minute)
