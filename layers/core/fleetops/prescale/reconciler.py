"""Reconcile: desired scheduled actions from the calendar, actual ones from AWS, apply the difference.

Safe to run twice (the second run finds nothing to do) and safe to stop half-way (every change is
independent and the next run recomputes from scratch).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from fleetops.audit import AuditRecord, Outcome
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease, LeaseScope
from fleetops.aws.notifier import Notifier
from fleetops.aws.switches import KillSwitch
from fleetops.calendar import CalendarEntry, InvalidEntry, Occurrence, parse_entries
from fleetops.capacity import ScalableTarget, ScheduledAction
from fleetops.config import EndpointConfig, FleetConfig, VariantConfig
from fleetops.prescale import findings, planner, raise_release
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.demand_history import DemandHistory
from fleetops.prescale.forecast import DemandSeries, corrected
from fleetops.prescale.forecast_plan import HistoryPlan, plan_from_history
from fleetops.prescale.models import ACTION_PREFIX, ACTOR, Change, ForecastSummary, Plan, VariantPlan
from fleetops.prescale.served_capacity import READ_DAYS, ServedCapacity, served_capacity
from fleetops.remediation.alarm_states import AlarmStates
from fleetops.remediation.state_table import RemediationStateStore


class UnmanagedVariantError(LookupError):
    """A variant in fleet.yaml has no scalable target; raised after every other endpoint was reconciled."""


LEASE_TTL_S = 120
CAPACITY = LeaseScope.CAPACITY
_APPLY_ORDER = {"raise_min": 0, "lower_min": 1, "release_min": 2, "create": 3, "update": 4, "delete": 5}


@dataclass
class PrescaleDeps:
    """The adapters the reconciler needs, built once per cold start by the handler."""

    autoscaling: AutoScaling
    calendar: CalendarTable
    audit: AuditTable
    kill_switch: KillSwitch
    lease: EndpointLease | None = None  # its capacity lease: a rollout's config lease holds nothing up here
    history: DemandHistory | None = None  # None: plan from the configured levels only
    notifier: Notifier | None = None  # a forecast above a variant's cap is sent here (and audited)
    raises: RemediationStateStore | None = None  # the alarm responder's raises, released once their alarms clear
    raise_hold: timedelta = timedelta(minutes=15)  # the playbook's rails.raise_hold_seconds
    alarm_states: AlarmStates | None = None  # CloudWatch's word on a raise's alarms, for OK events lost or late


def load_calendar(
    config: FleetConfig, table_rows: list[dict[str, Any]]
) -> tuple[list[CalendarEntry], list[InvalidEntry]]:
    """All calendar entries, each validated on its own: the valid ones and the reasons for the rest.

    Any source may hold any kind; an entry without ``kind`` takes its source's, as before kinds existed.
    """
    known = config.endpoint_names()
    entries: list[CalendarEntry] = []
    invalid: list[InvalidEntry] = []
    for source, rows, default_kind in (
        ("fleet.yaml:recurring", config.recurring, "recurring"),
        ("fleet.yaml:off_peak", config.off_peak, "off_peak"),
        ("calendar-table", table_rows, "one_off"),
    ):
        ok, bad = parse_entries(source, rows, default_kind, known)
        entries += ok
        invalid += bad
    return entries, invalid


def _configured(
    variant: VariantConfig,
    found: list[Occurrence],
    config: FleetConfig,
    now: datetime,
    why: str,
    history: DemandSeries | None = None,
) -> HistoryPlan:
    ratio = planner.configured_today(variant, found, now, history) if history is not None else 1.0
    today = (lambda at: corrected(1.0, ratio, at, now)) if ratio != 1.0 else None
    current, steps = planner.timeline(variant, found, config.prescale, now, today)
    uncorrected = planner.timeline(variant, found, config.prescale, now)[0] if today else current
    summary = ForecastSummary(
        source="configuration", why=why, level_ratio=round(ratio, 3), configured_baseline_rps=variant.baseline_rps
    )
    return HistoryPlan(current=current, uncorrected=uncorrected, steps=steps, summary=summary, sizes=[], over_cap=[])


def plan_variant(
    config: FleetConfig,
    endpoint_name: str,
    variant: VariantConfig,
    found: list[Occurrence],
    now: datetime,
    history: DemandHistory | None,
) -> HistoryPlan:
    """The variant's plan from its own history when there is enough of it, else from the configured levels."""
    settings = config.prescale
    if history is None:
        return _configured(variant, found, config, now, "no history reader: configured levels")
    if settings.history_days == 0:
        return _configured(variant, found, config, now, "history_days is 0: configured levels")
    try:
        series = history.invocations(endpoint_name, variant.name, now - timedelta(days=settings.history_days), now)
    except (ClientError, BotoCoreError) as exc:  # after retries: today's behaviour beats no plan at all
        return _configured(
            variant, found, config, now, f"could not read the Invocations history ({exc}): configured levels"
        )
    days = series.days_recorded()
    if days < settings.min_history_days:
        why = f"{days:.1f} days of Invocations history, {settings.min_history_days:g} needed: configured levels"
        return _configured(variant, found, config, now, why, series)
    return plan_from_history(variant, found, settings, now, series)


def read_served_capacity(
    config: FleetConfig, endpoint_name: str, variant: VariantConfig, now: datetime, history: DemandHistory | None
) -> ServedCapacity | None:
    """The rate per instance to plan with, from what the variant served while requests queued (None: the
    configured one, without a history reader or with ``history_days`` 0)."""
    if history is None or config.prescale.history_days == 0:
        return None
    configured = variant.capacity_rps_per_instance
    try:
        minutes = history.minute_loads(endpoint_name, variant.name, now - timedelta(days=READ_DAYS), now)
    except (ClientError, BotoCoreError) as exc:  # after retries: the configured rate, as before this was read
        why = f"could not read InvocationsPerInstance and QueueDepth ({exc}): the configured rate"
        return ServedCapacity(configured_rps=configured, used_rps=configured, why=why)
    return served_capacity(configured, minutes)


def plan_endpoint(
    config: FleetConfig,
    endpoint: EndpointConfig,
    entries: list[CalendarEntry],
    now: datetime,
    autoscaling: AutoScaling,
    history: DemandHistory | None = None,
) -> tuple[list[VariantPlan], list[Change]]:
    settings = config.prescale
    # Wide enough to catch an event that started before now (still in its scale-in delay), one whose lead time
    # begins inside the horizon, and every past occurrence the history holds (to learn its size).
    window_start = now - timedelta(days=max(8, settings.history_days + 1))
    horizon_end = now + timedelta(hours=settings.planning_horizon_hours)
    window_end = horizon_end + timedelta(minutes=settings.lead_time_minutes + 60)
    found = [o for e in entries for o in e.occurrences(window_start, window_end) if o.applies_to(endpoint.name)]
    plans: list[VariantPlan] = []
    changes: list[Change] = []
    for variant in endpoint.variants:
        if variant.role == "canary":
            # A canary exists only while a rollout runs, which sizes it to each step's weight and registers its
            # target (fleetops.rollout.canary_capacity): a schedule from fleet.yaml would undo that.
            continue
        target = autoscaling.get_target(endpoint.name, variant.name)
        if target is None:
            raise UnmanagedVariantError(
                f"endpoint {endpoint.name!r} variant {variant.name!r} has no scalable target registered with "
                "Application Auto Scaling; register it (README, Deploy) or remove it from fleet.yaml"
            )
        served = read_served_capacity(config, endpoint.name, variant, now, history)
        rated = variant.model_copy(update={"capacity_rps_per_instance": served.used_rps}) if served else variant
        plan = plan_variant(config, endpoint.name, rated, found, now, history)
        steps, dropped = planner.within_quota(
            plan.current,
            plan.steps,
            settings.max_scheduled_actions,
            horizon_end,
            precise_until=now + planner.PRECISE_AHEAD,
        )
        desired = planner.scheduled_actions(endpoint.name, variant, steps)
        actual = autoscaling.list_scheduled_actions(endpoint.name, variant.name, ACTION_PREFIX)
        reasons = {a.name: s.reason for a, s in zip(desired, steps, strict=True)}
        changes += planner.diff(desired, actual, reasons)
        if target.min_capacity < plan.current:
            # Raised at once; lowering is left to the scheduled actions and the autoscaler, but for today's level.
            why = "the plan needs more now" if plan.summary.source == "history" else "an event is in effect now"
            changes.append(_min_change("raise_min", endpoint.name, variant.name, target, plan.current, why))
        elif plan.current < target.min_capacity <= plan.uncorrected:
            # Today's level needs fewer now, and MinCapacity is no higher than this plan would hold without it (so
            # not an operator's raise above the plan; a responder's raise is kept below): lower it now, as the
            # scheduled actions only change it at their own times.
            why = f"today's level x{plan.summary.level_ratio:g} needs {plan.current} now"
            changes.append(_min_change("lower_min", endpoint.name, variant.name, target, plan.current, why))
        plans.append(
            VariantPlan(
                endpoint_name=endpoint.name,
                variant_name=variant.name,
                current_min_capacity=plan.current,
                timeline=steps,
                desired=desired,
                forecast=plan.summary,
                event_sizes=plan.sizes,
                over_cap=plan.over_cap,
                dropped_steps=dropped,
                served_capacity=served,
            )
        )
    return plans, changes


def _min_change(
    kind: Literal["raise_min", "lower_min"],
    endpoint_name: str,
    variant_name: str,
    target: ScalableTarget,
    minimum: int,
    reason: str,
) -> Change:
    """MinCapacity set to ``minimum`` now (MaxCapacity raised to it where lower)."""
    return Change(
        kind=kind,
        endpoint_name=endpoint_name,
        variant_name=variant_name,
        name=f"{endpoint_name}/{variant_name}",
        reason=reason,
        before={"min_capacity": target.min_capacity, "max_capacity": target.max_capacity},
        after={"min_capacity": minimum, "max_capacity": max(target.max_capacity, minimum)},
    )


def _apply(change: Change, autoscaling: AutoScaling) -> None:
    if change.kind in ("raise_min", "lower_min"):
        assert isinstance(change.after, dict)
        autoscaling.set_capacity(
            change.endpoint_name, change.variant_name, change.after["min_capacity"], change.after["max_capacity"]
        )
    elif change.kind == "delete":
        assert isinstance(change.before, ScheduledAction)
        autoscaling.delete_scheduled_action(change.before)
    else:
        assert isinstance(change.after, ScheduledAction)
        autoscaling.put_scheduled_action(change.after)


def _audit(deps: PrescaleDeps, change: Change, trigger: str, outcome: Outcome, dry_run: bool, now: datetime) -> None:
    def dump(side: Any) -> dict[str, Any] | None:
        return side.model_dump(mode="json") if isinstance(side, ScheduledAction) else side

    deps.audit.write(
        AuditRecord(
            endpoint_name=change.endpoint_name,
            actor=ACTOR,
            trigger=trigger,
            action=f"{change.kind} {change.name}",
            reason=change.reason + (f" [{change.error}]" if change.error else ""),
            outcome=outcome,
            before=dump(change.before),
            after=dump(change.after),
            dry_run=dry_run,
            at=now,
        )
    )


def _apply_endpoint(
    deps: PrescaleDeps, endpoint_name: str, changes: list[Change], trigger: str, now: datetime
) -> tuple[list[Change], bool]:
    """Apply one endpoint's changes under its capacity lease; returns the changes with outcomes and whether it ran.

    Every change here is a capacity write (scheduled actions, MinCapacity raises and releases), so only another
    capacity writer (a reconciler run, an alarm's scale-out) defers it; a rollout's config lease does not.
    """
    holder = f"{ACTOR}/{trigger}"
    if deps.lease is not None and not deps.lease.acquire(endpoint_name, holder, LEASE_TTL_S, CAPACITY):
        current = deps.lease.current(endpoint_name, CAPACITY)
        who = current.holder if current else "another writer"
        reason = f"{CAPACITY} lease held by {who}; retried on the next run"
        deferred = [c.model_copy(update={"outcome": "skipped", "error": reason}) for c in changes]
        deps.audit.write(
            AuditRecord(
                endpoint_name=endpoint_name,
                actor=ACTOR,
                trigger=trigger,
                action=f"defer {len(changes)} change(s)",
                reason=reason,
                outcome="skipped",
                at=now,
            )
        )
        return deferred, False
    done: list[Change] = []
    try:
        for planned in sorted(changes, key=lambda c: (_APPLY_ORDER[c.kind], c.name)):
            try:
                if planned.kind == "release_min" and deps.raises is not None:
                    result = raise_release.apply(
                        planned, deps.raises, deps.autoscaling, deps.raise_hold, now, deps.alarm_states
                    )
                else:
                    _apply(planned, deps.autoscaling)
                    result = planned.model_copy(update={"outcome": "applied"})
            except (ClientError, BotoCoreError) as exc:  # after retries: record, carry on, next run repairs
                result = planned.model_copy(update={"outcome": "failed", "error": str(exc)})
            _audit(deps, result, trigger, result.outcome, False, now)
            done.append(result)
    finally:
        if deps.lease is not None:
            deps.lease.release(endpoint_name, holder, CAPACITY)
    return done, True


def reconcile(
    config: FleetConfig,
    deps: PrescaleDeps,
    now: datetime,
    trigger: str,
    dry_run: bool,
    environment: str | None = None,
) -> Plan:
    """Plan every managed endpoint and, unless held back by dry run or the kill switch, apply the plan.

    Every dependency is an AWS adapter, so the call is shown rather than run (``tests/integration/test_prescale.py``
    runs it against the emulator)::

        plan = reconcile(config, deps, now=event_time, trigger="schedule", dry_run=False)
        [c.kind for c in plan.changes]  # e.g. ['create', 'create']
    """
    entries, invalid = load_calendar(config, deps.calendar.one_off_entries())
    kill_switch = deps.kill_switch.engaged()
    held_back = dry_run or kill_switch
    variants: list[VariantPlan] = []
    changes: list[Change] = []
    deferred: list[str] = []
    unmanaged: list[str] = []
    for endpoint in config.managed_by(environment):
        try:
            plans, planned = plan_endpoint(config, endpoint, entries, now, deps.autoscaling, deps.history)
        except UnmanagedVariantError as exc:
            unmanaged.append(str(exc))
            continue
        variants += plans
        for plan in plans:
            findings.report(plan, deps.audit, deps.notifier, trigger, now, dry_run=held_back)
        if deps.raises is not None:
            if any(c.kind == "lower_min" for c in planned):
                # A responder raise stands until its release: today's level does not lower MinCapacity under it.
                raised = {r.variant_name for r in deps.raises.raises(endpoint.name)}
                planned = [c for c in planned if not (c.kind == "lower_min" and c.variant_name in raised)]
            planned += raise_release.release_changes(
                deps.raises, deps.autoscaling, deps.raise_hold, endpoint.name, plans, now, deps.alarm_states
            )
        if not planned:
            continue
        if held_back:
            for change in planned:
                _audit(deps, change, trigger, "planned", True, now)
            changes += planned
            continue
        done, ran = _apply_endpoint(deps, endpoint.name, planned, trigger, now)
        changes += done
        if not ran:
            deferred.append(endpoint.name)
    if unmanaged:  # fail the run (and so the errors alarm) only after the healthy endpoints are done
        raise UnmanagedVariantError("; ".join(unmanaged))
    return Plan(
        now=now,
        trigger=trigger,
        config_version=config.version,
        dry_run=dry_run,
        kill_switch=kill_switch,
        applied=not held_back,
        variants=variants,
        changes=changes,
        invalid_entries=invalid,
        deferred_endpoints=deferred,
    )
