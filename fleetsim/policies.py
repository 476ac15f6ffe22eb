"""The policies the simulator compares, each driven by the project's own decision code.

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

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from devtools.alarm_evaluator import alarm_state
from fleetops.audit import AuditRecord
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.switches import KillSwitch
from fleetops.capacity import ScalableTarget, ScheduledAction
from fleetops.config import EndpointConfig, FleetConfig, VariantConfig
from fleetops.metrics import MetricName
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.reconciler import PrescaleDeps, reconcile
from fleetops.remediation.alarm import ParsedAlarm, StateValue
from fleetops.remediation.decide import Gate, RailState, decide
from fleetops.remediation.models import ActionType, AlarmSpec, Playbook
from fleetsim.fleet import Minute, Policy, Scaler
from fleetsim.stack import TargetTrackingSpec

#: The metrics the simulator produces, by the name the playbook's alarms watch.
SIMULATED_METRICS: dict[MetricName, Callable[[Minute], float]] = {
    MetricName.QUEUE_DEPTH: lambda m: m.queue_per_instance,
}


@dataclass
class TargetTracking:
    spec: TargetTrackingSpec
    name: str = "target-tracking"
    high_datapoints: int = 3
    low_datapoints: int = 15
    low_ratio: float = 0.9
    _high: int = 0
    _low: int = 0
    _last_out: datetime | None = None
    _last_in: datetime | None = None

    def before(self, at: datetime, scaler: Scaler) -> None:
        pass

    def after(self, minute: Minute, scaler: Scaler) -> None:
        target = self.spec.target_per_instance_per_minute
        metric = minute.invocations_per_instance
        self._high = self._high + 1 if metric > target else 0
        self._low = self._low + 1 if metric < self.low_ratio * target else 0
        wanted = max(1, math.ceil(round(minute.arrived / target, 9)))
        at = minute.at + timedelta(minutes=1)  # the datapoint is complete at the end of its minute
        if self._high >= self.high_datapoints and wanted > scaler.desired:
            if _cooled(self._last_out, at, self.spec.scale_out_cooldown_s):
                scaler.set_desired(wanted)
                self._last_out = at
        elif (
            self._low >= self.low_datapoints
            and wanted < scaler.desired
            and _cooled(self._last_in, at, self.spec.scale_in_cooldown_s)
        ):
            scaler.set_desired(wanted)
            self._last_in = at


def _cooled(last: datetime | None, at: datetime, cooldown_s: int) -> bool:
    return last is None or at - last >= timedelta(seconds=cooldown_s)


# ---- the pre-scale reconciler, on in-memory adapters -------------------------------------------------


class SimulatedAutoScaling(AutoScaling):
    """Application Auto Scaling for one simulated variant: the scalable target is the :class:`Scaler`."""

    def __init__(self, scaler: Scaler) -> None:  # no client: nothing here leaves the process
        self.scaler = scaler
        self.actions: dict[str, ScheduledAction] = {}
        self.fired: set[str] = set()

    def get_target(self, endpoint_name: str, variant_name: str) -> ScalableTarget | None:
        return ScalableTarget(min_capacity=self.scaler.min_capacity, max_capacity=self.scaler.max_capacity)

    def set_capacity(self, endpoint_name: str, variant_name: str, min_capacity: int, max_capacity: int) -> None:
        self.scaler.set_range(min_capacity, max_capacity)

    def list_scheduled_actions(self, endpoint_name: str, variant_name: str, prefix: str) -> list[ScheduledAction]:
        return [a for name, a in sorted(self.actions.items()) if name.startswith(prefix)]

    def put_scheduled_action(self, action: ScheduledAction) -> None:
        self.actions[action.name] = action
        self.fired.discard(action.name)

    def delete_scheduled_action(self, action: ScheduledAction) -> None:
        self.actions.pop(action.name, None)

    def fire_due(self, at: datetime) -> None:
        """Run every one-time action whose time has come, in time order, as Application Auto Scaling does."""
        due = [
            (when, a)
            for name, a in self.actions.items()
            if name not in self.fired and (when := a.runs_at()) is not None and when <= at
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
    name: str = "calendar pre-scaling"
    _autoscaling: SimulatedAutoScaling | None = None
    _next_run: datetime | None = None

    def __post_init__(self) -> None:
        self._simulated = self.config.model_copy(update={"endpoints": (self.endpoint,)})  # this endpoint only

    def before(self, at: datetime, scaler: Scaler) -> None:
        if self._autoscaling is None:
            self._autoscaling = SimulatedAutoScaling(scaler)
        self._autoscaling.fire_due(at)
        if self._next_run is None or at >= self._next_run:
            deps = PrescaleDeps(self._autoscaling, _Rows(self.one_off_rows), _NoAudit(), _Released())
            reconcile(self._simulated, deps, now=at, trigger="schedule", dry_run=False)
            self._next_run = at + timedelta(seconds=self.interval_s)

    def after(self, minute: Minute, scaler: Scaler) -> None:
        pass


# ---- the playbook's alarms and the responder's decisions ---------------------------------------------


@dataclass
class _AlarmState:
    kind: str
    spec: AlarmSpec
    metric: Callable[[Minute], float]
    minutes: list[float] = field(default_factory=list)  # the current period's per-minute values
    datapoints: deque[float] = field(default_factory=deque)
    state: StateValue = "OK"

    def datapoint(self) -> float:
        values = self.minutes
        if self.spec.statistic == "Sum":
            return sum(values)
        if self.spec.statistic == "Maximum":
            return max(values)
        if self.spec.statistic == "Minimum":
            return min(values)
        return sum(values) / len(values)

    def verdict(self) -> StateValue:
        """CloudWatch's M-of-N decision on the datapoints so far, as the local system's alarm evaluator makes it."""
        state = alarm_state(
            list(self.datapoints),
            comparison=self.spec.comparison,
            threshold=self.spec.threshold,
            datapoints_to_alarm=self.spec.datapoints_to_alarm or self.spec.evaluation_periods,
            treat_missing="notBreaching",  # the template's alarms; the simulator never lacks a datapoint anyway
        ).state
        return state or self.state


@dataclass
class AlarmResponse:
    """CloudWatch's M-of-N evaluation of each simulated alarm kind, then the responder's ``decide``."""

    playbook: Playbook
    endpoint_name: str
    variant: VariantConfig
    name: str = "alarm responder"
    rails: RailState = field(default_factory=RailState)
    decisions: list[tuple[datetime, str, str]] = field(default_factory=list)  # (at, kind, reason) of each plan
    _alarms: list[_AlarmState] = field(default_factory=list)

    def __post_init__(self) -> None:
        for kind, spec in self.playbook.alarms.items():
            metric = SIMULATED_METRICS.get(spec.metric)
            if metric is not None and spec.divided_by is None and not spec.per_max_num_seqs:
                self._alarms.append(_AlarmState(kind, spec, metric))

    def before(self, at: datetime, scaler: Scaler) -> None:
        pass

    def after(self, minute: Minute, scaler: Scaler) -> None:
        for alarm in self._alarms:
            alarm.minutes.append(alarm.metric(minute))
            if len(alarm.minutes) * 60 < alarm.spec.period_seconds:
                continue
            alarm.datapoints.append(alarm.datapoint())
            alarm.minutes.clear()
            while len(alarm.datapoints) > alarm.spec.evaluation_periods:
                alarm.datapoints.popleft()
            new = alarm.verdict()
            if new != alarm.state:
                self._transition(alarm, new, minute.at + timedelta(minutes=1), scaler)

    def _transition(self, alarm: _AlarmState, new: StateValue, at: datetime, scaler: Scaler) -> None:
        parsed = ParsedAlarm(
            alarm_name=f"simulated-remediation-{alarm.kind}-{self.endpoint_name}-{self.variant.name}",
            kind=alarm.kind,
            endpoint_name=self.endpoint_name,
            variant_name=self.variant.name,
            state=new,
            previous_state=alarm.state,
            state_timestamp=at.isoformat(),
            at=at,
            reason=f"simulated {alarm.spec.metric} {list(alarm.datapoints)}",
            observed=max(alarm.datapoints),
            threshold=alarm.spec.threshold,
        )
        alarm.state = new
        target = ScalableTarget(min_capacity=scaler.min_capacity, max_capacity=scaler.max_capacity)
        decision = decide(parsed, self.variant, playbook=self.playbook, target=target, rails=self.rails, gate=Gate())
        for plan in decision.plans:
            self.decisions.append((at, alarm.kind, f"{plan.action} {plan.status}: {plan.reason}"))
            if plan.status == "go" and plan.action == ActionType.SCALE_OUT and plan.after:
                scaler.set_range(plan.after["min_capacity"], plan.after["max_capacity"])
                self.rails = RailState(last_scale_out_at=at, recent_actions=(*self.rails.recent_actions, at))


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
