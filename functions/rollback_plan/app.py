"""Rollback, every pass of its loop: look at the endpoint and return the next safe action.

Event: ``{"request": <rollback input>, "attempt": n, "now": <state entered time>}``. Returns one of
``wait``, ``zero_canary``, ``restore_config``, ``finish`` with what the state machine needs to do it, or
``join`` when another rollback of the endpoint is at work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from fleetops.aws.lease import EndpointLease
from fleetops.aws.sagemaker_endpoint import read_endpoint
from fleetops.rollout.model_pointer import ModelPointerStore
from fleetops.rollout.rollback import RollbackRequest, plan_rollback
from fleetops.settings import CommonSettings

logger = Logger()
tracer = Tracer()


class Settings(CommonSettings):
    model_pointer_prefix: str


class Event(BaseModel):
    request: RollbackRequest
    attempt: int = 0
    now: datetime


settings = Settings.from_env()
pointers = ModelPointerStore()
lease = EndpointLease(settings.lease_table) if settings.lease_table else None


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    e = Event.model_validate(event)
    request = e.request.model_copy(update={"attempt": e.attempt})
    read_lease = lease.current if lease else None
    step = plan_rollback(request, e.now, read_endpoint, pointers.get, settings.model_pointer_prefix, read_lease)
    logger.info(
        "rollback step",
        extra={"action": step.action, "note": step.note, "attempt": step.attempt, "aborts": step.stop_execution_arn},
    )
    return step.model_dump(mode="json")
