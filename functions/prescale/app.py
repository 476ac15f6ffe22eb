"""Pre-scale reconciler: keeps Application Auto Scaling scheduled actions in line with the release calendar."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease
from fleetops.aws.notifier import Notifier
from fleetops.aws.switches import KillSwitch
from fleetops.config import load_fleet_config
from fleetops.metrics import MetricName
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.demand_history import DemandHistory
from fleetops.prescale.events import parse_event
from fleetops.prescale.models import Plan
from fleetops.prescale.reconciler import PrescaleDeps, reconcile
from fleetops.remediation.alarm_states import AlarmStates
from fleetops.remediation.playbook_file import load_rails
from fleetops.remediation.state_table import RemediationStateStore
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
metrics = Metrics()
tracer = Tracer()


class Settings(CommonSettings):
    calendar_table: str
    remediation_state_table: str = ""  # the alarm responder's raises; empty: none are released here
    playbook_path: str = "/opt/python/fleet_config/playbook.yaml"


# A wrong environment or fleet.yaml fails the cold start with a clear message, before any event.
settings = Settings.from_env()
config = load_fleet_config(settings.fleet_config_path)
raise_hold = load_rails(settings.playbook_path).raise_hold


@cache
def dependencies() -> PrescaleDeps:
    """AWS adapters, built once per execution environment on its first invocation."""
    return PrescaleDeps(
        autoscaling=AutoScaling(),
        calendar=CalendarTable(settings.calendar_table),
        audit=AuditTable(settings.audit_table),
        kill_switch=KillSwitch(settings.kill_switch_parameter),
        lease=EndpointLease(settings.lease_table) if settings.lease_table else None,
        history=DemandHistory(),
        notifier=Notifier(settings.notification_topic_arn) if settings.notification_topic_arn else None,
        raises=RemediationStateStore(settings.remediation_state_table) if settings.remediation_state_table else None,
        raise_hold=raise_hold,
        alarm_states=AlarmStates() if settings.remediation_state_table else None,
    )


def report(plan: Plan) -> None:
    for entry in plan.invalid_entries:
        logger.warning("skipped invalid calendar entry", extra=entry.model_dump())
    metrics.add_metric(MetricName.PRESCALE_INVALID_ENTRIES, MetricUnit.Count, len(plan.invalid_entries))
    metrics.add_metric(MetricName.PRESCALE_CHANGES, MetricUnit.Count, sum(c.outcome == "applied" for c in plan.changes))
    at_risk = sum(o.requests_at_risk for v in plan.variants for o in v.over_cap)
    metrics.add_metric(MetricName.PRESCALE_OVER_CAP, MetricUnit.Count, at_risk)
    for variant in plan.variants:
        if variant.forecast is not None:
            logger.info(
                "planned from " + variant.forecast.source,
                extra={
                    "variant": variant.variant_name,
                    "forecast": variant.forecast.model_dump(mode="json"),
                    "event_sizes": [s.model_dump() for s in variant.event_sizes],
                },
            )
    logger.info(
        "reconciled",
        extra={"changes": [f"{c.outcome} {c.kind} {c.name}" for c in plan.changes], "dry_run": plan.dry_run},
    )


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = parse_event(event)
    plan = reconcile(
        config,
        dependencies(),
        request.time,
        request.trigger,
        dry_run=request.dry_run or settings.dry_run,
        environment=settings.environment_name,
    )
    report(plan)
    return plan.model_dump(mode="json")
