"""Canary rollout, approval steps: issue a single-use approval id, store the task token, notify the team.

Invoked with ``lambda:invoke.waitForTaskToken``; the rollout waits until the approval endpoint (or an
operator with the CLI/console) answers the token. The token is never logged nor put in a message.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from fleetops.aws import clients
from fleetops.rollout.approval_gate import ApprovalRequest, NotifyDeps, request_approval
from fleetops.rollout.approval_table import ApprovalTable
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()


class Settings(CommonSettings):
    approval_table: str
    approval_url: str


# A wrong environment fails the cold start with a clear message, before any event.
settings = Settings.from_env()


@cache
def dependencies() -> NotifyDeps:
    """AWS adapters, built once per execution environment on its first invocation."""
    sns = clients.client("sns")

    def publish(subject: str, message: str) -> None:
        sns.publish(TopicArn=settings.notification_topic_arn, Subject=subject, Message=message)

    return NotifyDeps(store=ApprovalTable(settings.approval_table), publish=publish, approval_url=settings.approval_url)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = ApprovalRequest.model_validate(event)
    record = request_approval(request, dependencies())
    logger.info("approval requested", extra={"rollout_id": record.rollout_id, "step_weight": record.step_weight})
    return {"rollout_id": record.rollout_id, "expires_at": record.expires_at}
