"""Ask for an approval (issue an id, store the token, notify) and take a decision (once, by another person).

The two halves of the human approval gate. The task token never leaves the approval table and the
Step Functions call; the approver only ever sees the opaque approval id. A decision is claimed, sent to
Step Functions, audited and only then marked used: a send that fails gives the claim back, so the
decision is never lost in between.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict, Field

from fleetops.audit import AuditRecord, record_id_time
from fleetops.rollout.approval import (
    ApprovalRecord,
    ApprovalRefusedError,
    Decision,
    approval_key,
    check_not_requester,
    check_usable,
    decision_deadline,
    new_approval_id,
)
from fleetops.rollout.requester import RolloutRecord, recorded_requester

#: Error name the rollout sees when an approver rejects (its Catch sends it to rollback).
REJECTED_ERROR = "RolloutRejected"


#: The audit trail's actor for approval decisions.
AUDIT_ACTOR = "approval"


class ApprovalStore(Protocol):
    def put(self, record: ApprovalRecord) -> None: ...

    def rollout_record(self, execution_name: str) -> RolloutRecord | None: ...

    def get(self, key: str) -> ApprovalRecord | None: ...

    def pending(self, rollout_id: str) -> list[ApprovalRecord]: ...

    def claim(self, key: str, decision: Decision, decided_by: str, now: datetime) -> ApprovalRecord: ...

    def release(self, key: str, decided_by: str) -> None: ...

    def complete(self, key: str, decision: Decision, decided_by: str, now: datetime) -> None: ...


class TaskGoneError(RuntimeError):
    """Step Functions no longer waits for this token (timed out, rolled back or stopped)."""


class ApprovalRequest(BaseModel):
    """What the state machine passes to the approval-notify function (with ``.waitForTaskToken``).

    The requester is not in it: it is read from the request record (:mod:`fleetops.rollout.requester`), which
    ``execution_name`` and ``execution_input`` (the execution's context, not its input's fields) must match.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_token: str
    rollout_id: str
    endpoint_name: str
    step_weight: int
    analysis_summary: str
    execution_name: str
    execution_id: str
    execution_input: Any
    timeout_seconds: int
    heartbeat_seconds: int | None = None
    now: datetime = Field(description="the RequestApproval state's entered time: the task's clocks start there")


@dataclass(frozen=True)
class NotifyDeps:
    store: ApprovalStore
    publish: Callable[[str, str], None]  # (subject, message)
    approval_url: str


def _next_move(request: ApprovalRequest) -> str:
    if request.step_weight >= 100:
        return "the promotion (the primary's instances take the new model, then every user reaches it)"
    return f"moving {request.step_weight}% of users to the canary"


def request_approval(request: ApprovalRequest, deps: NotifyDeps) -> ApprovalRecord:
    """Issue a single-use approval id valid until Step Functions stops waiting, store the token, notify the team.

    Raises
    ------
    RequesterUnknownError
        The execution is not a recorded request (started directly, or with another input): nothing is stored.
    """
    record_of_request = deps.store.rollout_record(request.execution_name)
    requested_by = recorded_requester(record_of_request, request.execution_name, request.execution_input, request.now)
    approval_id = new_approval_id()
    expires_at = decision_deadline(request.now, request.timeout_seconds, request.heartbeat_seconds)
    record = ApprovalRecord(
        approval_key=approval_key(approval_id),
        task_token=request.task_token,
        rollout_id=request.rollout_id,
        endpoint_name=request.endpoint_name,
        step_weight=request.step_weight,
        summary=request.analysis_summary,
        expires_at=expires_at,
        requested_by=requested_by,
        execution_id=request.execution_id,
    )
    deps.store.put(record)
    links = {d: f"{deps.approval_url}?{urlencode({'id': approval_id, 'decision': d})}" for d in ("approve", "reject")}
    message = (
        f"Rollout {request.rollout_id} on {request.endpoint_name} waits for approval before {_next_move(request)}; "
        f"until then no more users reach the new model.\nRequested by {requested_by} (who may not approve it).\n\n"
        f"Analysis so far: {request.analysis_summary}\n\n"
        f"Approve: {links['approve']}\nReject:  {links['reject']}\n\n"
        f"The links open a confirmation page (signed-in AWS identity required), work once and expire at "
        f"{datetime.fromtimestamp(expires_at, UTC).isoformat()} (the rollout rolls back then). Operators can also "
        f"decide with `fleetctl rollout approve|reject {request.rollout_id}`."
    )
    deps.publish(f"Approve rollout {request.rollout_id} at {request.step_weight}%?"[:100], message)
    return record


@dataclass(frozen=True)
class DecideDeps:
    store: ApprovalStore
    send_success: Callable[[str, str], None]  # (task token, output JSON)
    send_failure: Callable[[str, str, str], None]  # (task token, error, cause)
    audit: Callable[[AuditRecord], object]  # one record per decision Step Functions accepted


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
        Malformed, unknown, already used, expired or claimed id, or the caller requested the rollout;
        nothing is sent to Step Functions.
    TaskGoneError
        The id was valid but the rollout no longer waits (raised by ``send_*``).
    """
    return decide(approval_key(approval_id), decision, decided_by, now, deps)


def submit_for_rollout(
    rollout_id: str, decision: Decision, decided_by: str, now: datetime, deps: DecideDeps, note: str = ""
) -> DecisionResult:
    """:func:`submit_decision` for the step ``rollout_id`` waits at (``fleetctl rollout approve|reject``).

    The CLI has no link (the approval id exists only in the mail); the signed caller is the approver either
    way, so deciding by rollout id grants nothing the link would not.
    """
    usable = [r for r in deps.store.pending(rollout_id) if r.expires_at > int(now.timestamp())]
    if not usable:
        raise ApprovalRefusedError("unknown", f"rollout {rollout_id!r} does not wait for an approval now")
    return decide(usable[0].approval_key, decision, decided_by, now, deps, note=note)


def decide(
    key: str, decision: Decision, decided_by: str, now: datetime, deps: DecideDeps, note: str = ""
) -> DecisionResult:
    """:func:`submit_decision` by the approval's table key. ``note`` (why) goes with the decision.

    Claim, send, audit, then mark used. A send Step Functions refuses for good (the task is gone) or
    that fails (throttled, unreachable) releases the claim, so the decision can be made again. The same
    caller retrying the same decision over a claim of its own that was never released (the function timed out
    after the send, before the audit) finds the task gone because its own send took it: that is the decision
    made, so it is audited and marked used then.
    """
    found = check_usable(deps.store.get(key), now, decided_by, decision)
    check_not_requester(found, decided_by)
    # Still claimed by this caller for this decision: an earlier attempt claimed it and stopped before it could
    # mark it used or give it back (a failed send gives it back), so it stopped during or after its send.
    own_earlier_claim = found.status == "claimed" and (found.decided_by, found.decision) == (decided_by, decision)
    record = deps.store.claim(key, decision, decided_by, now)
    why = f": {note}" if note else ""
    try:
        if decision == "approve":
            output: dict[str, Any] = {"approved": True, "approved_by": decided_by, "decided_at": now.isoformat()}
            deps.send_success(record.task_token, json.dumps(output))
        else:
            deps.send_failure(record.task_token, REJECTED_ERROR, f"rejected by {decided_by} at {now.isoformat()}{why}")
    except TaskGoneError:
        if not own_earlier_claim:
            deps.store.release(key, decided_by)
            raise
        # The task went with the earlier attempt's send, whose audit was lost: record the decision now.
        why += " (sent by an earlier attempt that stopped before its audit; Step Functions no longer waits)"
    except BaseException:
        deps.store.release(key, decided_by)
        raise
    deps.audit(
        AuditRecord(
            endpoint_name=record.endpoint_name,
            actor=AUDIT_ACTOR,
            trigger=record.rollout_id,
            action=decision,
            reason=f"{decision} rollout {record.rollout_id} at {record.step_weight}% by {decided_by}{why}",
            outcome="applied",
            after={
                "rollout_id": record.rollout_id,
                "step_weight": record.step_weight,
                "decision": decision,
                "decided_by": decided_by,
                "requested_by": record.requested_by,
            },
            at=now,
            # One approval key is one decision: the key makes the record id unique per decision.
            record_id=f"{record_id_time(now)}#approval-{key[:16]}",
        )
    )
    deps.store.complete(key, decision, decided_by, now)
    return DecisionResult(
        rollout_id=record.rollout_id,
        endpoint_name=record.endpoint_name,
        step_weight=record.step_weight,
        decision=decision,
        decided_by=decided_by,
    )
