"""The alarm responder's raises, released by the pre-scale reconciler once their alarms have been OK for the hold."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fleetops.prescale.models import Change
from fleetops.remediation.raises import RaiseRecord, cleared_by_alarms, release_due, release_reason

if TYPE_CHECKING:
    from fleetops.aws.autoscaling import AutoScaling
    from fleetops.prescale.models import VariantPlan
    from fleetops.remediation.alarm_states import AlarmStates
    from fleetops.remediation.state_table import RemediationStateStore


def _as_released(
    record: RaiseRecord, now: datetime, hold: timedelta, alarm_states: AlarmStates | None
) -> RaiseRecord | None:
    """``record`` if its alarms have been OK for the hold, by the responder's events or else by CloudWatch's own
    alarm states (an OK event lost or out of order); ``None`` while it must stand."""
    if release_due(record, now, hold):
        return record
    if alarm_states is None or not record.in_alarm:
        return None
    ok_since = alarm_states.ok_since(record.in_alarm)
    if ok_since is None:
        return None
    seen = cleared_by_alarms(record, ok_since)
    return seen if release_due(seen, now, hold) else None


def release_changes(
    raises: RemediationStateStore,
    autoscaling: AutoScaling,
    hold: timedelta,
    endpoint_name: str,
    plans: list[VariantPlan],
    now: datetime,
    alarm_states: AlarmStates | None = None,
) -> list[Change]:
    """The responder's raises whose alarms have been OK for the hold: MinCapacity back to the plan's level now.

    Only a MinCapacity the raise set (not above it: someone else raised it further) is lowered, and never below the
    plan; a raise whose MinCapacity has already come down is just forgotten.
    """
    levels = {p.variant_name: p.current_min_capacity for p in plans}
    changes = []
    for standing in raises.raises(endpoint_name):
        plan_level = levels.get(standing.variant_name)
        record = _as_released(standing, now, hold, alarm_states) if plan_level is not None else None
        if plan_level is None or record is None:
            continue
        target = autoscaling.get_target(endpoint_name, record.variant_name)
        if target is None:
            continue
        lower = plan_level < target.min_capacity <= record.min_capacity
        changes.append(
            Change(
                kind="release_min",
                endpoint_name=endpoint_name,
                variant_name=record.variant_name,
                name=f"{endpoint_name}/{record.variant_name}",
                reason=release_reason(record, now, plan_level),
                before={"min_capacity": target.min_capacity, "max_capacity": target.max_capacity},
                after={
                    "min_capacity": plan_level if lower else target.min_capacity,
                    "max_capacity": target.max_capacity,
                },
            )
        )
    return changes


def apply(
    change: Change,
    raises: RemediationStateStore,
    autoscaling: AutoScaling,
    hold: timedelta,
    now: datetime,
    alarm_states: AlarmStates | None = None,
) -> Change:
    """Apply a release under the lease, on fresh state: an alarm that fired since keeps the raise."""
    assert isinstance(change.before, dict) and isinstance(change.after, dict)
    record = next((r for r in raises.raises(change.endpoint_name) if r.variant_name == change.variant_name), None)
    if record is None or _as_released(record, now, hold, alarm_states) is None:
        return change.model_copy(update={"outcome": "skipped", "error": "the raise's alarm fired again"})
    if change.after["min_capacity"] != change.before["min_capacity"]:
        autoscaling.set_capacity(
            change.endpoint_name, change.variant_name, change.after["min_capacity"], change.after["max_capacity"]
        )
    if not raises.forget_raise(change.endpoint_name, change.variant_name, released=record):
        return change.model_copy(update={"outcome": "skipped", "error": "the raise changed while it was released"})
    return change.model_copy(update={"outcome": "applied"})
