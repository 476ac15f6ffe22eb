"""``fleetctl status``: one endpoint's state and everything that may change it next.

Gathers, read-only: variants (weights, instances, MinCapacity/MaxCapacity), the next scheduled actions with
the reason the reconciler audited for each, alarms in ALARM, rollouts in flight, the two writer leases (config,
capacity), the kill switch, the stack's DryRun and the model pointer.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from fleetctl import audit_trail, awsclients, endpoints
from fleetctl.rollout_progress import RolloutProgress, running
from fleetctl.stack import ALARM_PREFIX, KILL_SWITCH, LEASE_TABLE, MODEL_POINTER_PREFIX, ROLLOUT_STATE_MACHINE, Stack

#: How far back the audit trail is read for the reasons of scheduled actions (the reconciler plans a
#: week ahead, so an action's "create" record is at most about that old).
REASON_LOOKBACK = timedelta(days=15)


class VariantStatus(BaseModel):
    name: str
    weight: float
    traffic_percent: float
    instances: int
    min_capacity: int | None
    max_capacity: int | None
    instance_type: str
    model_name: str


class UpcomingAction(BaseModel):
    name: str
    variant: str
    at: datetime | None
    schedule: str
    timezone: str
    min_capacity: int
    max_capacity: int
    reason: str | None


class AlarmInfo(BaseModel):
    name: str
    variant: str | None
    since: datetime | None
    reason: str


class LeaseStatus(BaseModel):
    holder: str
    expires_at: datetime
    expired: bool


class PointerStatus(BaseModel):
    model: str
    version: str
    endpoint_config_name: str
    previous_endpoint_config_name: str | None
    previous_version: str | None
    rollout_id: str
    sha256: str | None = None
    adapters: dict[str, str] | None = Field(default=None, description="adapter name -> version; None: none named")
    previous_adapters: dict[str, str] | None = None


class EndpointStatus(BaseModel):
    stack: str
    environment: str | None
    endpoint: str
    now: datetime
    endpoint_status: str
    endpoint_config_name: str
    kill_switch_engaged: bool
    dry_run: bool
    variants: list[VariantStatus]
    upcoming_actions: list[UpcomingAction]
    alarms_in_alarm: list[AlarmInfo]
    rollouts: list[RolloutProgress]
    lease: LeaseStatus | None  # the config writers' (rollout, rollback, promotion)
    capacity_lease: LeaseStatus | None  # the capacity writers' (reconciler, alarm scale-outs)
    model_pointer: PointerStatus | None


def _reasons(stack: Stack, endpoint_name: str, now: datetime) -> dict[str, str]:
    """Scheduled action name -> the reason of the newest audit record that created or updated it."""
    reasons: dict[str, str] = {}
    for record in audit_trail.records(stack, endpoint_name, since=now - REASON_LOOKBACK):
        verb, _, name = record.action.partition(" ")
        if verb in ("create", "update") and record.outcome == "applied":
            reasons[name] = record.reason
    return reasons


def _variants(endpoint_name: str, stack: Stack) -> tuple[str, str, list[VariantStatus]]:
    from fleetops.aws.autoscaling import AutoScaling

    snapshot = endpoints.read(endpoint_name, stack)
    autoscaling = AutoScaling(client=awsclients.client("application-autoscaling"))
    total = sum(v.weight for v in snapshot.variants) or 1.0
    variants = []
    for v in snapshot.variants:
        target = autoscaling.get_target(endpoint_name, v.variant_name)
        variants.append(
            VariantStatus(
                name=v.variant_name,
                weight=v.weight,
                traffic_percent=round(100 * v.weight / total, 1),
                instances=v.instance_count,
                min_capacity=target.min_capacity if target else None,
                max_capacity=target.max_capacity if target else None,
                instance_type=v.instance_type,
                model_name=v.model_name,
            )
        )
    return snapshot.status, snapshot.endpoint_config_name, variants


def upcoming_actions(
    endpoint_name: str, variants: list[str], now: datetime, reasons: dict[str, str], limit: int
) -> list[UpcomingAction]:
    """The next ``limit`` scheduled actions of the endpoint's variants (every prefix, not only pre-scaling)."""
    from fleetops.aws.autoscaling import AutoScaling

    autoscaling = AutoScaling(client=awsclients.client("application-autoscaling"))
    found = []
    for variant in variants:
        for action in autoscaling.list_scheduled_actions(endpoint_name, variant, prefix=""):
            at = action.runs_at()
            if at is not None and at < now:
                continue
            found.append(
                UpcomingAction(
                    name=action.name,
                    variant=variant,
                    at=at,
                    schedule=action.schedule,
                    timezone=action.timezone,
                    min_capacity=action.min_capacity,
                    max_capacity=action.max_capacity,
                    reason=reasons.get(action.name),
                )
            )
    far = now + timedelta(days=3650)
    return sorted(found, key=lambda a: (a.at or far, a.variant))[:limit]


def alarms_in_alarm(stack: Stack, endpoint_name: str) -> list[AlarmInfo]:
    """The stack's remediation alarms on this endpoint that are in ALARM now."""
    cloudwatch = awsclients.client("cloudwatch")
    found = []
    kwargs: dict[str, object] = {"AlarmNamePrefix": stack.output(ALARM_PREFIX), "StateValue": "ALARM"}
    while True:
        page = cloudwatch.describe_alarms(**kwargs)
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", []):
            if alarm.get("StateValue") != "ALARM":  # the emulator ignores StateValue beside AlarmNamePrefix
                continue
            dims = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
            for query in alarm.get("Metrics", []):
                stat = query.get("MetricStat", {}).get("Metric", {})
                dims |= {d["Name"]: d["Value"] for d in stat.get("Dimensions", [])}
            if dims.get("EndpointName", endpoint_name) != endpoint_name:
                continue
            if "EndpointName" not in dims and f"-{endpoint_name}-" not in alarm["AlarmName"]:
                continue
            found.append(
                AlarmInfo(
                    name=alarm["AlarmName"],
                    variant=dims.get("VariantName"),
                    since=alarm.get("StateUpdatedTimestamp"),
                    reason=alarm.get("StateReason", ""),
                )
            )
        if not page.get("NextToken"):
            return sorted(found, key=lambda a: a.name)
        kwargs["NextToken"] = page["NextToken"]


def _lease(stack: Stack, endpoint_name: str, now: datetime, *, capacity: bool = False) -> LeaseStatus | None:
    from datetime import UTC

    from fleetops.aws.lease import EndpointLease, LeaseScope

    scope = LeaseScope.CAPACITY if capacity else LeaseScope.CONFIG
    info = EndpointLease(stack.output(LEASE_TABLE), client=awsclients.client("dynamodb")).current(endpoint_name, scope)
    if info is None:
        return None
    expires = datetime.fromtimestamp(info.expires_at, tz=UTC)
    return LeaseStatus(holder=info.holder, expires_at=expires, expired=expires <= now)


def _pointer(stack: Stack, endpoint_name: str) -> PointerStatus | None:
    from fleetops.rollout.model_pointer import ModelPointerStore, pointer_parameter

    store = ModelPointerStore(client=awsclients.client("ssm"))
    pointer = store.get(pointer_parameter(stack.output(MODEL_POINTER_PREFIX), endpoint_name))
    if pointer is None:
        return None
    # Versions only: the folders and checksums are in the pointer itself and the registry.
    versions = {"adapters": pointer.adapters, "previous_adapters": pointer.previous_adapters}
    return PointerStatus.model_validate(
        pointer.model_dump()
        | {key: None if found is None else {n: a.version for n, a in found.items()} for key, found in versions.items()}
    )


def kill_switch_engaged(stack: Stack) -> bool:
    from fleetops.aws.switches import KillSwitch

    return KillSwitch(stack.output(KILL_SWITCH), client=awsclients.client("ssm")).engaged()


def collect(stack: Stack, endpoint_name: str, now: datetime, limit: int = 5) -> EndpointStatus:
    """Everything ``status`` shows about one endpoint, read now."""
    status, config_name, variants = _variants(endpoint_name, stack)
    reasons = _reasons(stack, endpoint_name, now)
    return EndpointStatus(
        stack=stack.name,
        environment=stack.environment,
        endpoint=endpoint_name,
        now=now,
        endpoint_status=status,
        endpoint_config_name=config_name,
        kill_switch_engaged=kill_switch_engaged(stack),
        dry_run=stack.dry_run,
        variants=variants,
        upcoming_actions=upcoming_actions(endpoint_name, [v.name for v in variants], now, reasons, limit),
        alarms_in_alarm=alarms_in_alarm(stack, endpoint_name),
        rollouts=running(stack.output(ROLLOUT_STATE_MACHINE), endpoint_name),
        lease=_lease(stack, endpoint_name, now),
        capacity_lease=_lease(stack, endpoint_name, now, capacity=True),
        model_pointer=_pointer(stack, endpoint_name),
    )
