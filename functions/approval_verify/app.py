"""Canary rollout, after an approval step's callback: go on only if the approval function recorded the approval.

A ``SendTaskSuccess`` made with a task token read elsewhere (the execution history, the approval table) resumes
the rollout; this step re-reads the approval table and fails the step (audited, then the rollout rolls back)
unless an approver who is not the recorded requester approved this step through the approval URL.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from fleetops.aws.audit_table import AuditTable
from fleetops.rollout.approval_table import ApprovalTable
from fleetops.rollout.approval_verify import ApprovalUnverifiedError, VerifyDeps, VerifyRequest, verify_approval
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()


class Settings(CommonSettings):
    approval_table: str


# A wrong environment fails the cold start with a clear message, before any event.
settings = Settings.from_env()


@cache
def dependencies() -> VerifyDeps:
    """AWS adapters, built once per execution environment on its first invocation."""
    return VerifyDeps(store=ApprovalTable(settings.approval_table), audit=AuditTable(settings.audit_table).write)


@logger.inject_lambda_context(clear_state=True, log_event=False)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = VerifyRequest.model_validate(event)
    try:
        verified = verify_approval(request, dependencies())
    except ApprovalUnverifiedError as exc:
        logger.error("approval not verified", extra={"rollout_id": request.rollout_id, "why": str(exc)})
        raise
    logger.info("approval verified", extra=verified.model_dump())
    return verified.model_dump(mode="json")
