"""Ask for an approval (issue an id, store the token, notify) and take a decision (consume the id once).

The two halves of the human approval gate. The task token never leaves the approval table and the
Step Functions call; the approver only ever sees the opaque approval id.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict

from fleetops.rollout.approval import ApprovalRecord, Decision, approval_key, new_approval_id

#: Error name the rollout sees when an approver rejects (its Catch sends it to rollback).
REJECTED_ERROR = "RolloutRejected"


class ApprovalStore(Protocol):
    def put(self, record: ApprovalRecord) -> None: ...

    def consume(self, key: str, decision: Decision, decided_by: str, now: datetime) -> ApprovalRecord: ...


class TaskGoneError(RuntimeError):
    """Step Functions no longer waits for this token (timed out, rolled back or stopped)."""


class ApprovalRequest(BaseModel):
    """What the state machine passes to the approval-notify function (with ``.waitForTaskToken``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_token: str
    rollout_id: str
    endpoint_name: str
    step_weight: int
    analysis_summary: str
    timeout_seconds: int
    now: datetime


@dataclass(frozen=True)
class NotifyDeps:
    store: ApprovalStore
    publish: Callable[[str, str], None]  # (subject, message)
    approval_url: str


def request_approval(request: ApprovalRequest, deps: NotifyDeps) -> ApprovalRecord:
    """Issue a single-use approval id valid for the approval timeout, store the token, notify the team."""
    approval_id = new_approval_id()
    record = ApprovalRecord(
        approval_key=approval_key(approval_id),
        task_token=request.task_token,
        rollout_id=request.rollout_id,
        endpoint_name=request.endpoint_name,
        step_weight=request.step_weight,
        summary=request.analysis_summary,
        expires_at=int(request.now.timestamp()) + request.timeout_seconds,
    )
    deps.store.put(record)
    links = {d: f"{deps.approval_url}?{urlencode({'id': approval_id, 'decision': d})}" for d in ("approve", "reject")}
    message = (
        f"Rollout {request.rollout_id} on {request.endpoint_name} waits for approval at {request.step_weight}% canary "
        f"traffic.\n\nAnalysis: {request.analysis_summary}\n\n"
        f"Approve: {links['approve']}\nReject:  {links['reject']}\n\n"
        f"The links open a confirmation page (signed-in AWS identity required), work once and expire in "
        f"{request.timeout_seconds} s. Operators can also decide in the Step Functions console or with "
        "`aws stepfunctions send-task-success` / `send-task-failure`."
    )
    deps.publish(f"Approve rollout {request.rollout_id} at {request.step_weight}%?"[:100], message)
    return record


@dataclass(frozen=True)
class DecideDeps:
    store: ApprovalStore
    send_success: Callable[[str, str], None]  # (task token, output JSON)
    send_failure: Callable[[str, str, str], None]  # (task token, error, cause)


class DecisionResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    rollout_id: str
    endpoint_name: str
    step_weight: int
    decision: Decision
    decided_by: str


def submit_decision(
    approval_id: str, decision: Decision, decided_by: str, now: datetime, deps: DecideDeps
) -> DecisionResult:
    """Consume the approval id (once) and pass the decision to the waiting rollout.

    Raises
    ------
    ApprovalRefusedError
        Malformed, unknown, already used or expired id; nothing is sent to Step Functions.
    TaskGoneError
        The id was valid but the rollout no longer waits (raised by ``send_*``).
    """
    return decide(approval_key(approval_id), decision, decided_by, now, deps)


def decide(
    key: str, decision: Decision, decided_by: str, now: datetime, deps: DecideDeps, note: str = ""
) -> DecisionResult:
    """:func:`submit_decision` for a caller that found the pending approval by its table key, not by a link.

    ``fleetctl rollout approve`` finds the approval a rollout waits at in the approval table (the link's id
    exists only in the mail) and decides through the same single-use consume and the same SendTask call.
    ``note`` (why) goes with a rejection's cause.
    """
    record = deps.store.consume(key, decision, decided_by, now)
    if decision == "approve":
        output: dict[str, Any] = {"approved": True, "approved_by": decided_by, "decided_at": now.isoformat()}
        deps.send_success(record.task_token, json.dumps(output))
    else:
        why = f": {note}" if note else ""
        deps.send_failure(record.task_token, REJECTED_ERROR, f"rejected by {decided_by} at {now.isoformat()}{why}")
    return DecisionResult(
        rollout_id=record.rollout_id,
        endpoint_name=record.endpoint_name,
        step_weight=record.step_weight,
        decision=decision,
        decided_by=decided_by,
    )
