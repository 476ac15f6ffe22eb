"""The alarm responder's raises, released by the pre-scale reconciler once their alarms have been OK for the hold."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fleetops.prescale.models import Change
from fleetops.remediation.raises import release_due, release_reason

if TYPE_CHECKING:
    from fleetops.aws.autoscaling import AutoScaling
    from fleetops.prescale.models import VariantPlan
    from fleetops.remediation.state_table import RemediationStateStore


def release_changes(
    raises: RemediationStateStore,
    autoscaling: AutoScaling,
    hold: timedelta,
    endpoint_name: str,
    plans: list[VariantPlan],
    now: datetime,
) -> list[Change]:
    """The responder's raises whose alarms have been OK for the hold: MinCapacity back to the plan's level now.

    Only a MinCapacity the raise set (not above it: someone else raised it further) is lowered, and never below the
    plan; a raise whose MinCapacity has already come down is just forgotten.
    """
    levels = {p.variant_name: p.current_min_capacity for p in plans}
    changes = []
    for record in raises.raises(endpoint_name):
        plan_level = levels.get(record.variant_name)
        if plan_level is None or not release_due(record, now, hold):
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
    change: Change, raises: RemediationStateStore, autoscaling: AutoScaling, hold: timedelta, now: datetime
) -> Change:
    """Apply a release under the lease, on fresh state: an alarm that fired since keeps the raise."""
    assert isinstance(change.before, dict) and isinstance(change.after, dict)
    record = next((r for r in raises.raises(change.endpoint_name) if r.variant_name == change.variant_name), None)
    if record is None or not release_due(record, now, hold):
        return change.model_copy(update={"outcome": "skipped", "error": "the raise's alarm fired again"})
    if change.after["min_capacity"] != change.before["min_capacity"]:
        autoscaling.set_capacity(
            change.endpoint_name, change.variant_name, change.after["min_capacity"], change.after["max_capacity"]
        )
    if not raises.forget_raise(change.endpoint_name, change.variant_name, released=record):
        return change.model_copy(update={"outcome": "skipped", "error": "the raise changed while it was released"})
    return change.model_copy(update={"outcome": "applied"})
