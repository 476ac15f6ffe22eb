"""Answer the task token a rollout waits on at an approval step (Step Functions ``SendTaskSuccess``/``Failure``).

The approval gate's send step, made only by the approval endpoint (the link's POST and ``fleetctl rollout
approve/reject`` both reach it through its signed URL).
A token Step Functions no longer waits for (the approval timed out, the rollout was stopped or rolled back)
is :class:`~fleetops.rollout.approval_gate.TaskGoneError`; the token itself is never logged nor put in a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from fleetops.aws import clients
from fleetops.aws.retry import error_code
from fleetops.rollout.approval_gate import ApprovalStore, DecideDeps, TaskGoneError

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_stepfunctions import SFNClient

    from fleetops.audit import AuditRecord

#: What Step Functions answers for a token it no longer waits for.
GONE_CODES = frozenset({"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"})


class TaskCallback:
    """Step Functions never answers "update in progress": botocore's standard retry mode is the only retry."""

    def __init__(self, client: SFNClient | None = None) -> None:
        self._client: SFNClient = client or clients.client("stepfunctions")

    def _answer(self, call: Callable[..., Any], **kwargs: str) -> None:
        try:
            call(**kwargs)
        except ClientError as exc:
            if error_code(exc) in GONE_CODES:
                raise TaskGoneError("the rollout no longer waits for this decision (timed out or stopped)") from None
            raise

    def send_success(self, task_token: str, output: str) -> None:
        self._answer(self._client.send_task_success, taskToken=task_token, output=output)

    def send_failure(self, task_token: str, error: str, cause: str) -> None:
        self._answer(self._client.send_task_failure, taskToken=task_token, error=error, cause=cause)

    def decide_deps(self, store: ApprovalStore, audit: Callable[[AuditRecord], object]) -> DecideDeps:
        """What :func:`~fleetops.rollout.approval_gate.submit_decision` needs: the store, this to answer, the audit."""
        return DecideDeps(store=store, send_success=self.send_success, send_failure=self.send_failure, audit=audit)
