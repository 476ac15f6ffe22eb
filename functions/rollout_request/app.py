"""Rollout requests behind an IAM-authorised Lambda function URL (``AuthType: AWS_IAM``): the only way to start one.

POST the rollout request (JSON). ``requested_by`` is the caller's IAM ARN from the request context Lambda's
URL integration fills in (a direct invoke, or a payload naming a caller, is refused: 403); a body that sets it
is refused (400). The request is recorded in the approval table, then the execution named after the rollout id
is started: the same request again answers the same execution (202), another request under that id is refused
(409). The approval steps read the requester from that record, so an execution started any other way (or with
another input) cannot be approved.
"""

from __future__ import annotations

import json
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from fleetops.rollout.function_url import Answer, UrlRequest, answer, route
from fleetops.rollout.request import RequestDeps, RolloutRequestRefusedError, request_rollout
from fleetops.rollout.request_records import RequestRecordTable
from fleetops.rollout.rollout_starter import RolloutStarter
from fleetops.rollout.url_caller import ForgedCallerError, signed_caller
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()


class Settings(CommonSettings):
    rollout_state_machine_arn: str
    approval_table: str


# A wrong environment fails the cold start with a clear message, before any request.
settings = Settings.from_env()


@cache
def dependencies() -> RequestDeps:
    """AWS adapters, built once per execution environment on its first invocation."""
    return RequestDeps(
        record=RequestRecordTable(settings.approval_table).record_request,
        start=RolloutStarter(settings.rollout_state_machine_arn).start,
    )


def _json(status: int, body: dict[str, Any]) -> Answer:
    return answer(status, json.dumps(body), "application/json")


def _refused(exc: ForgedCallerError) -> dict[str, Any]:
    body = json.dumps({"error": "forbidden", "message": str(exc)})
    return {"statusCode": 403, "headers": {"Content-Type": "application/json"}, "body": body}


def request(url_request: UrlRequest, caller: str) -> Answer:
    try:
        body = json.loads(url_request.body or "")
    except ValueError as exc:
        return _json(400, {"error": "malformed", "message": f"the body is not JSON: {exc}"})
    try:
        started = request_rollout(body, caller, dependencies(), url_request.received)
    except RolloutRequestRefusedError as exc:
        logger.warning("rollout request refused", extra={"status": exc.http_status, "caller": caller})
        return _json(exc.http_status, {"error": "refused", "message": str(exc)})
    logger.info("rollout requested", extra=started.model_dump())
    return _json(202, started.model_dump(mode="json"))


@logger.inject_lambda_context(clear_state=True, log_event=False)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        caller = signed_caller(event, context.invoked_function_arn)
    except ForgedCallerError as exc:
        logger.warning("not a signed function URL request", extra={"why": str(exc)})
        return _refused(exc)
    return route(UrlRequest.from_event(event), {"POST": partial(request, caller=caller)})
