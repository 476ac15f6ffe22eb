"""Canary rollout, first state: validate the request and compute the plan. Touches nothing.

Event (from the state machine): ``{"request": <execution input>, "now": <state entered time>}``.
An invalid request raises ``RolloutInputError`` listing every problem; the workflow then fails
before taking the lease or creating anything.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from pydantic import BaseModel, Field

from fleetops.aws import clients
from fleetops.aws.sagemaker_endpoint import read_endpoint
from fleetops.aws.switches import KillSwitch
from fleetops.config import load_fleet_config
from fleetops.promotion.shadow_capture import CaptureDestination
from fleetops.rollout.checks import CANARY_CHECKS, load_canary_checks
from fleetops.rollout.guardrails import StackLimits
from fleetops.rollout.model_pointer import ModelPointerStore
from fleetops.rollout.prepare import PrepareDeps, prepare_rollout
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()


class Settings(CommonSettings):
    model_pointer_prefix: str
    max_num_seqs: int | None = None  # the stack's MaxNumSeqs, written onto every model as SM_VLLM_MAX_NUM_SEQS
    # The closed deploy payload: every model gets this role, an image of this repository, weights from this bucket.
    model_execution_role_arn: str = Field(min_length=1)
    model_image_repository: str = Field(min_length=1)
    model_artifact_bucket: str = Field(min_length=1)
    canary_checks_path: str = ""  # the canary analysis's CANARY_CHECKS_PATH: the limits a request may only tighten
    # Where a shadowed rollout captures live requests (template.yaml CaptureBucket, CaptureKey); unset: refused.
    shadow_capture_bucket: str | None = None
    shadow_capture_key_arn: str | None = None


class Event(BaseModel):
    request: dict[str, Any]
    now: datetime


# A wrong environment fails the cold start with a clear message, before any event.
settings = Settings.from_env()
fleet = load_fleet_config(settings.fleet_config_path)
checks = load_canary_checks(settings.canary_checks_path or CANARY_CHECKS)


@cache
def dependencies() -> PrepareDeps:
    """AWS adapters, built once per execution environment on its first invocation."""
    return PrepareDeps(
        read_endpoint=partial(read_endpoint, client=clients.client("sagemaker")),
        read_pointer=ModelPointerStore().get,
        kill_switch_engaged=KillSwitch(settings.kill_switch_parameter).engaged,
        pointer_prefix=settings.model_pointer_prefix,
        fleet=fleet,
        checks=checks,
        stack=StackLimits(
            execution_role_arn=settings.model_execution_role_arn,
            image_repository=settings.model_image_repository,
            artifact_bucket=settings.model_artifact_bucket,
            environment_name=settings.environment_name,
            capture=CaptureDestination(settings.shadow_capture_bucket, settings.shadow_capture_key_arn)
            if settings.shadow_capture_bucket and settings.shadow_capture_key_arn
            else None,
        ),
        dry_run=settings.dry_run,
        max_num_seqs=settings.max_num_seqs,
    )


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parsed = Event.model_validate(event)
    plan = prepare_rollout(parsed.request, parsed.now, dependencies())
    logger.info("rollout planned", extra={"rollout_id": plan.rollout_id, "endpoint": plan.endpoint_name})
    return plan.model_dump(mode="json")
