"""Start the rollback state machine once per alarm transition (the execution name is the idempotency key)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING

from fleetops.aws import clients
from fleetops.aws.retry import error_code

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient


def execution_name(key: str, label: str) -> str:
    """A valid, deterministic Step Functions execution name (<= 80 chars of ``[A-Za-z0-9_-]``).

    Examples
    --------
    >>> len(execution_name("fleet-remediation-oom-manga-chat-canary|2026-11-21T19:02:00.000+0000", "oom")) <= 80
    True
    """
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '-', label)[:59]}-{digest}"


class RollbackWorkflow:
    """Starts ``RollbackStateMachine`` (``statemachines/rollback.asl.json``) for one endpoint.

    Its input is ``{"endpoint_name", "rollback_id", "reason", "requested_by", "abort_only", "canary_variant_name"}``;
    ``rollback_id`` is the execution name, so the workflow's own records name the alarm transition.

    Examples
    --------
    >>> from botocore.exceptions import ClientError
    >>> class StepFunctions:  # in-memory stand-in: a second start with a known name is refused
    ...     def __init__(self):
    ...         self.names = set()
    ...     def start_execution(self, stateMachineArn, name, input):
    ...         if name in self.names:
    ...             raise ClientError({"Error": {"Code": "ExecutionAlreadyExists"}}, "StartExecution")
    ...         self.names.add(name)
    ...         return {"executionArn": f"arn:aws:states:us-east-1:123456789012:execution:rollback:{name}"}
    >>> workflow = RollbackWorkflow("arn:aws:states:us-east-1:123456789012:stateMachine:rollback", StepFunctions())
    >>> workflow.start("manga-chat", "OOM", "alarm_responder", "oom-manga-chat-1a2b")
    ('arn:aws:states:us-east-1:123456789012:execution:rollback:oom-manga-chat-1a2b', True)
    >>> workflow.start("manga-chat", "OOM", "alarm_responder", "oom-manga-chat-1a2b")  # the event redelivered
    ('arn:aws:states:us-east-1:123456789012:execution:rollback:oom-manga-chat-1a2b', False)
    """

    def __init__(self, state_machine_arn: str, client: SFNClient | None = None) -> None:
        if not state_machine_arn:
            raise ValueError("RollbackWorkflow needs a state machine ARN")
        self._arn = state_machine_arn
        self._client: SFNClient = client or clients.client("stepfunctions")

    def start(
        self,
        endpoint_name: str,
        reason: str,
        requested_by: str,
        name: str,
        canary_variant_name: str | None = None,
        *,
        undo_promotion: bool = False,
    ) -> tuple[str, bool]:
        """Start the execution; returns ``(execution_arn, started_now)``.

        A second start with the same name (a redelivered event) does not start a second rollback:
        Step Functions either returns the running execution or answers ``ExecutionAlreadyExists``.
        ``undo_promotion``: a primary's alarm inside the watch window after its promotion puts the previous
        release back (the model pointer's previous config); otherwise the rollback only aborts a rollout in flight.
        """
        # abort_only: a canary alarm aborts the rollout in flight; it never undoes an earlier promotion.
        request = {
            "endpoint_name": endpoint_name,
            "rollback_id": name,
            "reason": reason,
            "requested_by": requested_by,
            "abort_only": not undo_promotion,
        }
        if canary_variant_name:
            request["canary_variant_name"] = canary_variant_name
        payload = json.dumps(request)
        try:
            answer = self._client.start_execution(stateMachineArn=self._arn, name=name, input=payload)
        except Exception as exc:
            if error_code(exc) != "ExecutionAlreadyExists":
                raise
            existing = self._arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"
            return existing, False
        return str(answer["executionArn"]), True
