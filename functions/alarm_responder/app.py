"""Alarm responder: runs the remediation playbook for the project's own CloudWatch alarm transitions."""

from __future__ import annotations

from functools import cache, partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import Field, ValidationError

from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease
from fleetops.aws.notifier import Notifier
from fleetops.aws.sagemaker_endpoint import VariantWeights, wait_in_service
from fleetops.aws.switches import KillSwitch
from fleetops.config import load_fleet_config
from fleetops.metrics import MetricName
from fleetops.remediation.alarm import AlarmStateChangeEvent
from fleetops.remediation.alarm_states import AlarmStates
from fleetops.remediation.last_promotion import LastPromotion
from fleetops.remediation.models import load_playbook
from fleetops.remediation.responder import Ports, RemediationIncompleteError, Responder, ResponderConfig, Response
from fleetops.remediation.rollback_workflow import RollbackWorkflow
from fleetops.remediation.state_table import RemediationStateStore
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from fleetops.audit import Outcome

logger = Logger()
metrics = Metrics()
tracer = Tracer()

_COUNTED: dict[Outcome, MetricName] = {
    "applied": MetricName.REMEDIATION_ACTIONS,
    "planned": MetricName.REMEDIATION_SKIPPED,
    "skipped": MetricName.REMEDIATION_SKIPPED,
    "failed": MetricName.REMEDIATION_FAILED,
}


class Settings(CommonSettings):
    lease_table: str = Field(min_length=1)
    alarm_name_prefix: str = Field(min_length=1, description="<stack>-remediation-: alarms the responder owns")
    remediation_state_table: str = Field(min_length=1)
    idempotency_table: str = Field(min_length=1)
    rollback_state_machine_arn: str = ""  # empty: the responder sets the canary's weight to 0 itself
    model_pointer_prefix: str = ""  # empty: no watch window after a promotion, a primary's alarm only notifies
    playbook_path: str = "/opt/python/fleet_config/playbook.yaml"
    ready_timeout_seconds: float = Field(default=20.0, gt=0)


# A wrong environment, fleet.yaml or playbook.yaml fails the cold start with a clear message.
settings = Settings.from_env()
config = ResponderConfig(
    playbook=load_playbook(settings.playbook_path),
    fleet=load_fleet_config(settings.fleet_config_path),
    alarm_prefix=settings.alarm_name_prefix,
    dry_run=settings.dry_run,
    environment=settings.environment_name,  # a dev stack never acts on a prod endpoint
)


@cache
def dependencies() -> Ports:
    """AWS adapters, built once per execution environment on its first invocation."""
    arn = settings.rollback_state_machine_arn
    return Ports(
        autoscaling=AutoScaling(),
        lease=EndpointLease(settings.lease_table),
        rails=RemediationStateStore(settings.remediation_state_table),
        audit=AuditTable(settings.audit_table),
        notifier=Notifier(settings.notification_topic_arn),
        kill_switch=KillSwitch(settings.kill_switch_parameter),
        weights=VariantWeights(),
        wait_ready=partial(wait_in_service, timeout_s=settings.ready_timeout_seconds),
        rollback=RollbackWorkflow(arn) if arn else None,
        alarm_states=AlarmStates(),  # a late event the alarm has overtaken is dropped, not acted on
        promotions=LastPromotion(prefix).get if (prefix := settings.model_pointer_prefix) else None,
    )


@cache
def persistence() -> tuple[DynamoDBPersistenceLayer, IdempotencyConfig]:
    """Powertools' idempotency store on DynamoDB and its settings, built once like the adapters (its import
    brings boto3, which the first invocation loads anyway, so the cold import stays small)."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig

    config = IdempotencyConfig(
        event_key_jmespath="[detail.alarm_name, detail.state.timestamp]",  # one alarm transition acts once
        raise_on_no_idempotency_key=True,
        expires_after_seconds=24 * 3600,
    )
    return DynamoDBPersistenceLayer(table_name=settings.idempotency_table), config


def report(response: Response) -> None:
    if response.status == "ignored":
        metrics.add_metric(MetricName.REMEDIATION_IGNORED, MetricUnit.Count, 1)
    for outcome in response.outcomes:
        metrics.add_metric(_COUNTED[outcome.outcome], MetricUnit.Count, 1)


def handle(alarm: AlarmStateChangeEvent) -> dict[str, Any]:
    # Metrics are counted in here, so a redelivered event (answered from the idempotency store) counts once.
    try:
        response = Responder(config, dependencies()).respond(alarm)
    except RemediationIncompleteError as exc:
        report(exc.response)
        raise
    report(response)
    return response.model_dump(mode="json")


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        alarm = AlarmStateChangeEvent.model_validate(event)
    except ValidationError as exc:
        logger.warning("malformed alarm event ignored", extra={"errors": exc.errors(include_url=False)})
        metrics.add_metric(MetricName.REMEDIATION_IGNORED, MetricUnit.Count, 1)
        return Response(status="ignored", reason=f"not a CloudWatch alarm state change: {exc}").model_dump(mode="json")
    from aws_lambda_powertools.utilities.idempotency import idempotent_function

    store, idempotency = persistence()
    idempotency.register_lambda_context(context)
    once = idempotent_function(data_keyword_argument="alarm", persistence_store=store, config=idempotency)
    result: dict[str, Any] = once(handle)(alarm=alarm)
    return result
