"""The playbook's alarms evaluated on the simulated metrics (queue depth from the simulated queue) and, on each
transition, the alarm responder's decision core (``fleetops.remediation.decide.decide``) with its rails; its ``go``
scale-outs are applied, stepping from the instances serving that minute.

As the real responder does, each raise is recorded (:mod:`fleetops.remediation.raises`), and once its alarms
have been OK for the playbook's ``raise_hold_seconds`` MinCapacity goes back to the plan's level, when the policy
is told that level (``plan_level``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from devtools.alarm_state import alarm_state
from fleetops.capacity import ScalableTarget
from fleetops.config import VariantConfig
from fleetops.metrics import MetricName
from fleetops.remediation.actions import ActionType
from fleetops.remediation.alarm import ParsedAlarm, StateValue
from fleetops.remediation.decide import Gate, decide
from fleetops.remediation.models import AlarmSpec, Playbook
from fleetops.remediation.rails import RailState
from fleetops.remediation.raises import RaiseRecord, alarmed, cleared, raised, release_due
from fleetsim.fleet import Minute, Scaler

#: The metrics the simulator produces, by the name the playbook's alarms watch.
SIMULATED_METRICS: dict[MetricName, Callable[[Minute], float]] = {
    MetricName.QUEUE_DEPTH: lambda m: m.queue_per_instance,
}


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
    """CloudWatch's M-of-N evaluation of each simulated alarm kind, then the responder's ``decide``.

    ``plan_level`` returns the pre-scale plan's current MinCapacity; with it, a raise whose alarms have been OK
    for ``rails.raise_hold_seconds`` is released to that level (the real stack's pre-scale reconciler does it
    on its next run; here it happens the minute the hold ends). ``None`` leaves raises standing.
    """

    playbook: Playbook
    endpoint_name: str
    variant: VariantConfig
    name: str = "alarm responder"
    plan_level: Callable[[], int] | None = None
    rails: RailState = field(default_factory=RailState)
    raise_record: RaiseRecord | None = None  # the in-memory form of the state table's raise for the variant
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
                self._transition(alarm, new, minute.at + timedelta(minutes=1), minute.serving, scaler)
        self._release(minute.at + timedelta(minutes=1), scaler)

    def _release(self, at: datetime, scaler: Scaler) -> None:
        record = self.raise_record
        if self.plan_level is None or record is None or not release_due(record, at, self.playbook.rails.raise_hold):
            return
        level = self.plan_level()
        if level < scaler.min_capacity <= record.min_capacity:  # as the reconciler's release_changes decides
            scaler.set_range(level, scaler.max_capacity)  # desired stays: target tracking scales in from here
        self.raise_record = None
        reason = f"released raise to MinCapacity {record.min_capacity}: alarms OK since {record.cleared_at}"
        self.decisions.append((at, "release", f"{reason}, back to the plan's {level}"))

    def _transition(self, alarm: _AlarmState, new: StateValue, at: datetime, serving: int, scaler: Scaler) -> None:
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
        decision = decide(
            parsed, self.variant, playbook=self.playbook, target=target, serving=serving, rails=self.rails, gate=Gate()
        )
        applied = False
        for plan in decision.plans:
            self.decisions.append((at, alarm.kind, f"{plan.action} {plan.status}: {plan.reason}"))
            if plan.status == "go" and plan.action == ActionType.SCALE_OUT and plan.after:
                scaler.set_range(plan.after["min_capacity"], plan.after["max_capacity"])
                self.rails = RailState(last_scale_out_at=at, recent_actions=(*self.rails.recent_actions, at))
                self.raise_record = raised(
                    self.raise_record,
                    endpoint_name=self.endpoint_name,
                    variant_name=self.variant.name,
                    alarm_name=parsed.alarm_name,
                    min_capacity=plan.after["min_capacity"],
                    at=at,
                )
                applied = True
        # The responder's bookkeeping (fleetops.remediation.responder): ALARM holds a standing raise, OK clears.
        if ActionType.SCALE_OUT not in getattr(alarm.spec.on_alarm, self.variant.role):
            return
        if new == "ALARM" and not applied:
            self.raise_record = alarmed(self.raise_record, parsed.alarm_name)
        elif new == "OK":
            self.raise_record = cleared(self.raise_record, parsed.alarm_name, at)
