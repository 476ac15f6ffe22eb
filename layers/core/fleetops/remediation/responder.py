"""Apply the playbook's decision for one alarm transition through injected AWS adapters.

Order of work: parse and resolve the alarm (ignored ones stop here), drop an event the alarm's own state has
overtaken (audited; :mod:`fleetops.remediation.staleness`), read what the decision needs,
:func:`~fleetops.remediation.decide.decide`, apply the ``go`` plans (a scale-out under the endpoint's capacity
lease, a canary weight under its config lease, after the endpoint is InService, re-deciding on fresh state), keep the
variant's raise record (:mod:`fleetops.remediation.raises`) in step with the alarm, then audit every plan, notify,
and report. Deferred or failed actions raise :class:`RemediationIncompleteError` after auditing and
notifying, so Lambda retries the event and finally sends it to the DLQ.

A scale-out records its raise; the alarms of scale-out kinds going OK record the clear, and the pre-scale
reconciler releases the raise once they have been OK for ``rails.raise_hold_seconds``.

A primary's alarm of a kind with ``on_alarm.promoted`` reads the endpoint's last promotion (its model pointer,
:mod:`fleetops.remediation.last_promotion`): inside fleet.yaml's ``watch_after_promotion_seconds`` it starts the
rollback workflow to undo that promotion (:mod:`fleetops.remediation.watch_window`); after it, it notifies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict

from fleetops.audit import AuditRecord, Outcome
from fleetops.aws.lease import LeaseHeldError, LeaseScope
from fleetops.aws.sagemaker_endpoint import EndpointNotReadyError
from fleetops.remediation.actions import FLEET_CHANGING, ActionType
from fleetops.remediation.alarm import IgnoredAlarmError, ParsedAlarm, parse_alarm
from fleetops.remediation.decide import ActionPlan, Decision, Gate, decide, plan_scale_out
from fleetops.remediation.rails import RailState
from fleetops.remediation.rollback_workflow import execution_name
from fleetops.remediation.staleness import stale_because
from fleetops.remediation.watch_window import WatchWindow

if TYPE_CHECKING:
    from fleetops.aws.audit_table import AuditTable
    from fleetops.aws.autoscaling import AutoScaling
    from fleetops.aws.lease import EndpointLease
    from fleetops.aws.notifier import Notifier
    from fleetops.aws.sagemaker_endpoint import VariantWeights
    from fleetops.aws.switches import KillSwitch
    from fleetops.capacity import ScalableTarget
    from fleetops.config import FleetConfig, VariantConfig
    from fleetops.remediation.alarm import AlarmStateChangeEvent
    from fleetops.remediation.alarm_states import AlarmStates
    from fleetops.remediation.models import Playbook
    from fleetops.remediation.raises import RaiseRecord
    from fleetops.remediation.rollback_workflow import RollbackWorkflow
    from fleetops.remediation.state_table import RemediationStateStore
    from fleetops.remediation.watch_window import Promotion

logger = Logger(child=True)

ACTOR = "alarm_responder"
#: The audit action of an event dropped as stale.
STALE_EVENT = "stale_event"


class ActionOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: ActionType
    outcome: Outcome
    reason: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    deferred: bool = False


class Response(BaseModel):
    """What the responder did with one event (the handler returns its JSON dump)."""

    model_config = ConfigDict(frozen=True)

    status: Literal["handled", "ignored"]
    reason: str = ""
    alarm_name: str | None = None
    kind: str | None = None
    endpoint_name: str | None = None
    variant_name: str | None = None
    role: str | None = None
    state: str | None = None
    dry_run: bool = False
    outcomes: tuple[ActionOutcome, ...] = ()
    notification_id: str | None = None


class RemediationIncompleteError(RuntimeError):
    """An action was deferred (lease held, endpoint updating) or failed; raised after audit and notify."""

    def __init__(self, response: Response) -> None:
        self.response = response
        bad = [f"{o.action}: {o.reason}" for o in response.outcomes if o.deferred or o.outcome == "failed"]
        super().__init__(f"{response.alarm_name}: {'; '.join(bad)}")


@dataclass(frozen=True)
class Ports:
    """The AWS adapters the responder uses, built once per cold start (or by a test)."""

    autoscaling: AutoScaling
    lease: EndpointLease
    rails: RemediationStateStore
    audit: AuditTable
    notifier: Notifier
    kill_switch: KillSwitch
    weights: VariantWeights
    wait_ready: Callable[[str], object]
    rollback: RollbackWorkflow | None = None
    #: The alarms' own state, asked before acting on an event that may be stale (``None``: not asked).
    alarm_states: AlarmStates | None = None
    #: The endpoint's last promotion (``LastPromotion.get``); ``None``: no watch window, a primary only notifies.
    promotions: Callable[[str], Promotion | None] | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


@dataclass(frozen=True)
class ResponderConfig:
    playbook: Playbook
    fleet: FleetConfig
    alarm_prefix: str
    dry_run: bool = False
    #: The stack's environment (``settings.environment_name``): a dev stack never acts on a prod endpoint.
    environment: str | None = None


def _resolve(alarm: ParsedAlarm, fleet: FleetConfig, environment: str | None) -> VariantConfig:
    managed = {e.name: e for e in fleet.managed_by(environment)}
    endpoint = managed.get(alarm.endpoint_name)
    if endpoint is None:
        scope = f"for environment {environment!r} " if environment else ""
        raise IgnoredAlarmError(
            f"endpoint {alarm.endpoint_name!r} is not managed by this stack "
            f"(fleet.yaml {scope}lists {sorted(managed)}); nothing changed"
        )
    variant = next((v for v in endpoint.variants if v.name == alarm.variant_name), None)
    if variant is None:
        known = sorted(v.name for v in endpoint.variants)
        raise IgnoredAlarmError(
            f"endpoint {alarm.endpoint_name!r} has no managed variant {alarm.variant_name!r} ({known})"
        )
    return variant


class Responder:
    """Runs the playbook for one event at a time.

    Every port is an AWS adapter, so it is shown here rather than run; the handler
    (``functions/alarm_responder/app.py``) builds the ports once per execution environment, and
    ``tests/integration/remediation`` runs it against the emulator::

        responder = Responder(ResponderConfig(playbook, fleet, "fleet-remediation-"), ports)
        response = responder.respond(AlarmStateChangeEvent.model_validate(event))
        response.outcomes[0].outcome  # 'applied' for a queue-depth alarm on a primary below its cap
    """

    def __init__(self, config: ResponderConfig, ports: Ports) -> None:
        self.config = config
        self.ports = ports

    def respond(self, event: AlarmStateChangeEvent) -> Response:
        """Handle one alarm transition; see the module docstring for the order of work.

        Raises
        ------
        RemediationIncompleteError
            When an action was deferred or failed (after the audit records and the notification).
        """
        try:
            alarm = parse_alarm(event, self.config.alarm_prefix, self.config.playbook)
            variant = _resolve(alarm, self.config.fleet, self.config.environment)
        except IgnoredAlarmError as exc:
            logger.warning("alarm ignored", extra={"alarm_name": event.detail.alarm_name, "why": str(exc)})
            return Response(status="ignored", reason=str(exc), alarm_name=event.detail.alarm_name)
        stale = self._stale(alarm)
        if stale is not None:
            return self._drop_stale(alarm, variant, stale)
        decision = self._decide(alarm, variant)
        outcomes = [self._apply(plan, decision, variant) for plan in decision.plans if plan.action != ActionType.NOTIFY]
        outcomes = self._track_raise(alarm, variant, outcomes)
        for outcome in outcomes:
            self._audit(alarm, outcome)
        trouble = any(o.deferred or o.outcome == "failed" for o in outcomes)
        notification_id = None
        if decision.plan(ActionType.NOTIFY) or trouble:
            notification_id = self.ports.notifier.publish(*self._summary(decision, outcomes))
        response = Response(
            status="handled",
            alarm_name=alarm.alarm_name,
            kind=alarm.kind,
            endpoint_name=alarm.endpoint_name,
            variant_name=alarm.variant_name,
            role=variant.role,
            state=alarm.state,
            dry_run=self.config.dry_run,
            outcomes=tuple(outcomes),
            notification_id=notification_id,
        )
        logger.info("alarm handled", extra={"response": response.model_dump(mode="json")})
        if trouble:
            raise RemediationIncompleteError(response)
        return response

    # --- stale events ---

    def _stale(self, alarm: ParsedAlarm) -> str | None:
        if self.ports.alarm_states is None:
            return None
        try:
            now_state, readable = self.ports.alarm_states.current(alarm.alarm_name), True
        except (ClientError, BotoCoreError):
            logger.warning("alarm state unreadable", extra={"alarm_name": alarm.alarm_name}, exc_info=True)
            now_state, readable = None, False
        return stale_because(alarm, now_state, self.ports.clock(), readable=readable)

    def _drop_stale(self, alarm: ParsedAlarm, variant: VariantConfig, why: str) -> Response:
        """Audited and logged, never acted on: neither a scale-out after OK nor an abort of a newer rollout."""
        logger.warning("stale alarm event dropped", extra={"alarm_name": alarm.alarm_name, "why": why})
        record = AuditRecord(
            endpoint_name=alarm.endpoint_name,
            actor=ACTOR,
            trigger=alarm.alarm_name,
            action=f"{STALE_EVENT}:{alarm.variant_name}",
            reason=why,
            outcome="skipped",
            dry_run=self.config.dry_run,
            at=alarm.at,
        )
        self.ports.audit.write(record)
        return Response(
            status="ignored",
            reason=why,
            alarm_name=alarm.alarm_name,
            kind=alarm.kind,
            endpoint_name=alarm.endpoint_name,
            variant_name=alarm.variant_name,
            role=variant.role,
            state=alarm.state,
            dry_run=self.config.dry_run,
        )

    # --- deciding ---

    def _scales_out(self, alarm: ParsedAlarm, variant: VariantConfig) -> bool:
        return ActionType.SCALE_OUT in getattr(self.config.playbook.alarms[alarm.kind].on_alarm, variant.role)

    def _decide(self, alarm: ParsedAlarm, variant: VariantConfig) -> Decision:
        on_alarm = self.config.playbook.alarms[alarm.kind].on_alarm
        acting = alarm.state == "ALARM"
        watch = self._watch(alarm) if acting and variant.role == "primary" and on_alarm.promoted is not None else None
        actions = set(on_alarm.for_role(variant.role, watched=watch is not None and watch.reason(alarm.at) is not None))
        target = self._target(alarm) if acting and ActionType.SCALE_OUT in actions else None
        serving = self._serving(alarm) if target is not None else None
        rails = self.ports.rails.get(alarm.endpoint_name) if acting and actions & FLEET_CHANGING else RailState()
        engaged = bool(acting and actions & FLEET_CHANGING and self.ports.kill_switch.engaged())
        gate = Gate(dry_run=self.config.dry_run, kill_switch=engaged)
        return decide(
            alarm,
            variant,
            playbook=self.config.playbook,
            target=target,
            serving=serving,
            rails=rails,
            gate=gate,
            watch=watch,
        )

    def _watch(self, alarm: ParsedAlarm) -> WatchWindow | None:
        """The endpoint's last promotion and its environment's window; ``None`` (notify only) when unknown."""
        endpoint = self.config.fleet.endpoint(alarm.endpoint_name)
        if self.ports.promotions is None or endpoint is None:
            return None
        seconds = self.config.fleet.rollout_floors(endpoint.environment).watch_after_promotion_seconds
        try:
            promotion = self.ports.promotions(alarm.endpoint_name)
        except (ClientError, BotoCoreError):
            # Unknown is not inside: without the pointer nothing says which release to go back to.
            logger.warning("model pointer unreadable", extra={"endpoint_name": alarm.endpoint_name}, exc_info=True)
            return None
        return WatchWindow(promotion=promotion, seconds=seconds)

    def _target(self, alarm: ParsedAlarm) -> ScalableTarget | None:
        return self.ports.autoscaling.get_target(alarm.endpoint_name, alarm.variant_name)

    def _serving(self, alarm: ParsedAlarm) -> int | None:
        """Instances the variant runs now; ``None`` (step from MinCapacity, and say so) when SageMaker cannot tell."""
        try:
            return self.ports.weights.instance_count(alarm.endpoint_name, alarm.variant_name)
        except (ClientError, BotoCoreError):
            # A scale-out from MinCapacity is still better than none while the alarm is firing.
            logger.warning("instance count unavailable", extra={"endpoint_name": alarm.endpoint_name}, exc_info=True)
            return None

    # --- applying ---

    def _apply(self, plan: ActionPlan, decision: Decision, variant: VariantConfig) -> ActionOutcome:
        if plan.status != "go":
            outcome: Outcome = "planned" if plan.status == "planned" else "skipped"
            return ActionOutcome(
                action=plan.action, outcome=outcome, reason=plan.reason, before=plan.before, after=plan.after
            )
        alarm = decision.alarm
        try:
            if plan.action == ActionType.SCALE_OUT:
                # A capacity write: a rollout's config lease does not hold it up, another capacity writer does.
                return self._under_lease(alarm, plan, LeaseScope.CAPACITY, partial(self._scale_out, alarm, variant))
            if plan.action == ActionType.ROLLBACK:
                if decision.watched:
                    return self._undo_promotion(alarm, plan)
                return self._rollback(alarm, plan)
        except (ClientError, BotoCoreError) as exc:
            logger.exception("remediation action failed", extra={"action": plan.action})
            return ActionOutcome(action=plan.action, outcome="failed", reason=f"{plan.reason}; AWS refused: {exc}")
        return ActionOutcome(action=plan.action, outcome="applied", reason=plan.reason)

    def _under_lease(
        self, alarm: ParsedAlarm, plan: ActionPlan, scope: LeaseScope, change: Callable[[], ActionOutcome]
    ) -> ActionOutcome:
        holder = f"{ACTOR}/{alarm.alarm_name}@{alarm.state_timestamp}"
        ttl = self.config.playbook.rails.lease_ttl_seconds
        try:
            # The lease's time is the wall clock at the write (fleetops.aws.lease), never the alarm's timestamp.
            with self.ports.lease.hold(alarm.endpoint_name, holder, ttl_s=ttl, scope=scope):
                self.ports.wait_ready(alarm.endpoint_name)
                return change()
        except (LeaseHeldError, EndpointNotReadyError) as exc:
            reason = f"deferred: {exc}; Lambda retries this event"
            return ActionOutcome(
                action=plan.action, outcome="skipped", reason=reason, before=plan.before, deferred=True
            )

    def _scale_out(self, alarm: ParsedAlarm, variant: VariantConfig) -> ActionOutcome:
        # Decide again on fresh state: another writer may have changed capacity before we got the lease.
        rails = self.ports.rails.get(alarm.endpoint_name)
        target = self._target(alarm)
        plan = plan_scale_out(
            alarm,
            variant,
            playbook=self.config.playbook,
            target=target,
            serving=self._serving(alarm) if target is not None else None,
            rails=rails,
            gate=Gate(),
        )
        if plan.status != "go" or plan.after is None:
            return ActionOutcome(action=plan.action, outcome="skipped", reason=plan.reason, before=plan.before)
        # Recorded before the change: a raise that is not recorded would never be released, while a record
        # of a change that then fails only brings MinCapacity back to the plan's level.
        self.ports.rails.record_raise(
            alarm.endpoint_name, alarm.variant_name, alarm.alarm_name, plan.after["min_capacity"], alarm.at
        )
        self.ports.autoscaling.set_capacity(
            alarm.endpoint_name, alarm.variant_name, plan.after["min_capacity"], plan.after["max_capacity"]
        )
        self.ports.rails.record(alarm.endpoint_name, ActionType.SCALE_OUT, alarm.at)
        return ActionOutcome(
            action=plan.action, outcome="applied", reason=plan.reason, before=plan.before, after=plan.after
        )

    def _undo_promotion(self, alarm: ParsedAlarm, plan: ActionPlan) -> ActionOutcome:
        """Start the rollback workflow to put the previous release back (the pointer's previous config)."""
        if self.ports.rollback is None:
            why = f"{plan.reason}: no rollback workflow configured, and only it can undo a promotion"
            return ActionOutcome(action=plan.action, outcome="skipped", reason=why)
        reason = f"{plan.reason} ({alarm.alarm_name}: {alarm.reason})"
        name = execution_name(f"{alarm.alarm_name}|{alarm.state_timestamp}", f"{alarm.kind}-{alarm.endpoint_name}")
        arn, started = self.ports.rollback.start(alarm.endpoint_name, reason, ACTOR, name, undo_promotion=True)
        if started:
            self.ports.rails.record(alarm.endpoint_name, ActionType.ROLLBACK, alarm.at)
        what = "rollback workflow started" if started else "rollback workflow already started for this alarm"
        return ActionOutcome(
            action=plan.action, outcome="applied", reason=f"{reason}: {what}", after={"execution_arn": arn}
        )

    def _rollback(self, alarm: ParsedAlarm, plan: ActionPlan) -> ActionOutcome:
        reason = f"{alarm.kind} alarm {alarm.alarm_name} on canary {alarm.variant_name!r}: {alarm.reason}"
        if self.ports.rollback is not None:
            name = execution_name(f"{alarm.alarm_name}|{alarm.state_timestamp}", f"{alarm.kind}-{alarm.endpoint_name}")
            arn, started = self.ports.rollback.start(alarm.endpoint_name, reason, ACTOR, name, alarm.variant_name)
            if started:
                self.ports.rails.record(alarm.endpoint_name, ActionType.ROLLBACK, alarm.at)
            what = "rollback workflow started" if started else "rollback workflow already started for this alarm"
            return ActionOutcome(
                action=plan.action, outcome="applied", reason=f"{plan.reason}: {what}", after={"execution_arn": arn}
            )

        def zero_weight() -> ActionOutcome:
            before = self.ports.weights.set_weight(alarm.endpoint_name, alarm.variant_name, 0.0)
            self.ports.rails.record(alarm.endpoint_name, ActionType.ROLLBACK, alarm.at)
            after = {**before, alarm.variant_name: 0.0}
            why = f"{plan.reason}: no rollback workflow configured, canary weight set to 0"
            return ActionOutcome(action=plan.action, outcome="applied", reason=why, before=before, after=after)

        # A weight is the endpoint's config: it waits for a rollout or rollback holding the config lease.
        return self._under_lease(alarm, plan, LeaseScope.CONFIG, zero_weight)

    # --- raise records ---

    def _track_raise(
        self, alarm: ParsedAlarm, variant: VariantConfig, outcomes: list[ActionOutcome]
    ) -> list[ActionOutcome]:
        """Keep the variant's raise record in step with an alarm of a scale-out kind.

        An applied scale-out recorded its raise already; any other ALARM holds a standing raise up again,
        and an OK records the clear (said in the recovery's reason, so the audit shows when it comes down).
        """
        if not self._scales_out(alarm, variant):
            return outcomes
        endpoint, name = alarm.endpoint_name, alarm.variant_name
        if alarm.state == "ALARM":
            if not any(o.action == ActionType.SCALE_OUT and o.outcome == "applied" for o in outcomes):
                self.ports.rails.record_alarm(endpoint, name, alarm.alarm_name)
            return outcomes
        if alarm.state != "OK":
            return outcomes
        record = self.ports.rails.record_clear(endpoint, name, alarm.alarm_name, alarm.at)
        if record is None:
            return outcomes
        note = self._raise_note(record)
        return [
            o.model_copy(update={"reason": f"{o.reason}; {note}"}) if o.action == ActionType.RECORD_RECOVERY else o
            for o in outcomes
        ]

    def _raise_note(self, record: RaiseRecord) -> str:
        if record.cleared_at is None:
            return f"MinCapacity stays raised to {record.min_capacity} while {', '.join(sorted(record.in_alarm))} fire"
        hold = self.config.playbook.rails.raise_hold_seconds
        return (
            f"the raise to MinCapacity {record.min_capacity} is released by the pre-scale reconciler "
            f"once its alarms have been OK for {hold}s"
        )

    # --- reporting ---

    def _audit(self, alarm: ParsedAlarm, outcome: ActionOutcome) -> None:
        record = AuditRecord(
            endpoint_name=alarm.endpoint_name,
            actor=ACTOR,
            trigger=alarm.alarm_name,
            action=f"{outcome.action}:{alarm.variant_name}",
            reason=outcome.reason,
            outcome=outcome.outcome,
            before=outcome.before,
            after=outcome.after,
            dry_run=self.config.dry_run,
            at=alarm.at,
        )
        self.ports.audit.write(record)

    def _summary(self, decision: Decision, outcomes: list[ActionOutcome]) -> tuple[str, str]:
        alarm = decision.alarm
        spec = self.config.playbook.alarms[alarm.kind]
        done = outcomes[0].outcome if outcomes else "notified"
        role = f"{decision.role}, watch window" if decision.watched else decision.role
        subject = f"[{alarm.state}] {alarm.kind} on {alarm.endpoint_name}/{alarm.variant_name} ({role}): {done}"
        observed = f"{alarm.observed:g}" if alarm.observed is not None else "n/a"
        lines = [
            f"What fired: {alarm.alarm_name} went {alarm.previous_state or '?'} -> {alarm.state}"
            f" at {alarm.at.isoformat()}.",
            f"  {spec.summary}",
            f"  Observed {observed}, threshold {alarm.threshold:g} ({spec.metric}, {spec.statistic}).",
            *([f"Release: {decision.watch_note}."] if decision.watch_note else []),
            "What was done:",
            *([f"  - {o.action}: {o.outcome} - {o.reason}" for o in outcomes] or ["  - nothing but this notification"]),
            f"What to look at: {spec.look_at}",
        ]
        if self.config.dry_run:
            lines.append("Mode: DRY RUN - nothing was changed.")
        return subject, "\n".join(lines)
