"""What a plan could not do, reported once a UTC day: a forecast above a variant's cap, steps merged for the quota,
instances that serve fewer requests than fleet.yaml says."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fleetops.audit import AuditRecord, record_id_time
from fleetops.prescale.models import ACTOR

if TYPE_CHECKING:
    from fleetops.aws.audit_table import AuditTable
    from fleetops.aws.notifier import Notifier
    from fleetops.prescale.models import VariantPlan


def report(
    plan: VariantPlan, audit: AuditTable, notifier: Notifier | None, trigger: str, now: datetime, dry_run: bool
) -> None:
    """Audit (and notify) what the plan could not do: a forecast above the cap, steps merged for the quota, a rate
    per instance lowered to what the instances served (the configured one is wrong for the model now serving).

    The reconciler runs every few minutes; each finding is reported once a UTC day, keyed by what it is about.
    """
    where = f"{plan.endpoint_name}/{plan.variant_name}"
    findings: list[tuple[str, str, str]] = []
    if plan.over_cap:
        first, at_risk = plan.over_cap[0], sum(o.requests_at_risk for o in plan.over_cap)
        stretches = ", ".join(f"{o.start:%a %H:%M}-{o.end:%H:%M}" for o in plan.over_cap[:3])
        more = f" and {len(plan.over_cap) - 3} more" if len(plan.over_cap) > 3 else ""
        reason = (
            f"the forecast needs up to {max(o.peak_instances for o in plan.over_cap)} instances, above the cap of "
            f"{first.cap}, in {stretches}{more} UTC: about {at_risk} requests would fail or time out; raise the "
            "variant's cap in fleet.yaml (and the scalable target's MaxCapacity)"
        )
        findings.append((f"forecast over cap {where}", f"{where}@{now:%Y-%m-%d}", reason))
    if plan.dropped_steps:
        kept = len(plan.desired)
        reason = (
            f"{len(plan.dropped_steps)} step(s) merged into their neighbours to keep {kept} scheduled actions "
            f"(Application Auto Scaling allows 200 per scalable target); first merged at "
            f"{plan.dropped_steps[0].at:%a %H:%M} UTC"
        )
        findings.append((f"merge steps {where}", f"{where}@{now:%Y-%m-%d}", reason))
    if plan.served_capacity is not None and plan.served_capacity.lowered:
        findings.append((f"served rate {where}", f"{where}@{now:%Y-%m-%d}", plan.served_capacity.why))
    notified = {
        f"forecast over cap {where}": f"[prescale] forecast above the cap on {where}",
        f"served rate {where}": f"[prescale] instances serve fewer requests than configured on {where}",
    }
    day = record_id_time(now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0))
    for action, key, reason in findings:
        record = AuditRecord(
            endpoint_name=plan.endpoint_name,
            actor=ACTOR,
            trigger=trigger,
            action=action,
            reason=reason,
            outcome="skipped",
            after={"key": key},
            dry_run=dry_run,
            at=now,
            # One record per finding and UTC day: a later run of the day finds the key taken and stays quiet.
            record_id=f"{day}#{hashlib.sha256(f'{action}|{key}'.encode()).hexdigest()[:12]}",
        )
        if audit.append_once(record) and notifier is not None and action in notified:
            notifier.publish(notified[action], reason)
