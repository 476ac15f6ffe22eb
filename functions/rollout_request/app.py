"""Rollout requests behind an IAM-authorised Lambda function URL (``AuthType: AWS_IAM``): the only way to start one.

POST the rollout request (JSON). ``requested_by`` is the caller's IAM ARN from the signed request; a body
that sets it is refused (400). The execution is named after the rollout id: the same request again answers
the same execution (202), another request under that id is refused (409). Only this function's role may
start the rollout state machine, so every rollout's requester is a signed identity the approval gate can
hold apart from its approvers.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.event_handler import LambdaFunctionUrlResolver, Response

from fleetops.rollout.request import RequestDeps, RolloutRequestRefusedError, request_rollout
from fleetops.rollout.rollout_starter import RolloutStarter
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()
app = LambdaFunctionUrlResolver()


class Settings(CommonSettings):
    rollout_state_machine_arn: str


# A wrong environment fails the cold start with a clear message, before any request.
settings = Settings.from_env()


@cache
def dependencies() -> RequestDeps:
    """AWS adapters, built once per execution environment on its first invocation."""
    return RequestDeps(start=RolloutStarter(settings.rollout_state_machine_arn).start)


def _json(status: int, body: dict[str, Any]) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body))


@app.post("/")
def request() -> Response[str]:
    caller = app.current_event.request_context.authorizer.iam.user_arn or ""
    try:
        body = json.loads(app.current_event.decoded_body or "")
    except ValueError as exc:
        return _json(400, {"error": "malformed", "message": f"the body is not JSON: {exc}"})
    try:
        started = request_rollout(body, caller, dependencies())
    except RolloutRequestRefusedError as exc:
        logger.warning("rollout request refused", extra={"status": exc.http_status, "caller": caller})
        return _json(exc.http_status, {"error": "refused", "message": str(exc)})
    logger.info("rollout requested", extra=started.model_dump())
    return _json(202, started.model_dump(mode="json"))


@logger.inject_lambda_context(clear_state=True, log_event=False)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
