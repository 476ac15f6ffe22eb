"""After an approval step's task token was answered: promote only what the approval URL recorded.

A task token can leak (the execution history's ``TaskScheduled`` event shows it, so does a read of the
approval table), and ``SendTaskSuccess`` with it resumes the rollout whoever sends it. So the step after the
callback re-reads the approval table: the step goes on only when the approval function recorded an approval
of this execution's step by a caller who is not (and may not be) the recorded requester. Anything else is
audited and fails the step with :data:`UNVERIFIED_ERROR`, which rolls the rollout back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from fleetops.audit import AuditRecord, record_id_time
from fleetops.rollout.approval import ApprovalRecord
from fleetops.rollout.approval_identity import not_distinct, person
from fleetops.rollout.requester import RequesterUnknownError, RolloutRecord, recorded_requester

#: Error name of a step whose approval the approval function did not record (the rollout rolls back).
UNVERIFIED_ERROR = "ApprovalUnverifiedError"

#: The audit action of a refused callback.
UNVERIFIED_ACTION = "approval-unverified"


class ApprovalUnverifiedError(Exception):
    """The task token was answered, but no approval by another person was recorded for this step."""


class VerifyStore(Protocol):
    def rollout_record(self, execution_name: str) -> RolloutRecord | None: ...

    def decisions(self, execution_id: str, step_weight: int) -> list[ApprovalRecord]: ...


class VerifyRequest(BaseModel):
    """What the VerifyApproval state passes: the step, and the execution's own context (not its input)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rollout_id: str
    endpoint_name: str
    step_weight: int
    execution_name: str
    execution_id: str
    execution_input: Any
    now: datetime


@dataclass(frozen=True)
class VerifyDeps:
    store: VerifyStore
    audit: Callable[[AuditRecord], object]


class Verified(BaseModel):
    model_config = ConfigDict(frozen=True)

    approved_by: str
    requested_by: str
    step_weight: int


def _why_not(request: VerifyRequest, store: VerifyStore) -> tuple[str, Verified | None]:
    try:
        requester = recorded_requester(
            store.rollout_record(request.execution_name), request.execution_name, request.execution_input, request.now
        )
    except RequesterUnknownError as exc:
        return str(exc), None
    recorded = store.decisions(request.execution_id, request.step_weight)
    decided = [r for r in recorded if r.status in ("claimed", "used") and r.decision and r.decided_by]
    approvals = [r for r in decided if r.decision == "approve"]
    if not approvals or len(approvals) != len(decided):
        return (
            f"the approval step at {request.step_weight}% was answered, but the approval function recorded "
            + ("a rejection" if decided else "no decision")
            + " for it: the task token was answered by someone else (SendTaskSuccess with a token read from the "
            "execution history or the approval table)",
            None,
        )
    for approval in approvals:
        why = not_distinct(person(requester), person(approval.decided_by or ""))
        if why:
            return why, None
    verified = Verified(
        approved_by=approvals[0].decided_by or "", requested_by=requester, step_weight=request.step_weight
    )
    return "", verified


def verify_approval(request: VerifyRequest, deps: VerifyDeps) -> Verified:
    """The recorded approval of this step, or (audited) :class:`ApprovalUnverifiedError` saying why there is none."""
    why, verified = _why_not(request, deps.store)
    if verified is not None:
        return verified
    deps.audit(
        AuditRecord(
            endpoint_name=request.endpoint_name,
            actor="approval",
            trigger=request.execution_id,
            action=UNVERIFIED_ACTION,
            reason=f"rollout {request.rollout_id} at {request.step_weight}% not promoted: {why}",
            outcome="skipped",
            after={"rollout_id": request.rollout_id, "step_weight": request.step_weight},
            at=request.now,
            # One refusal per step of an execution: a retried invocation writes the same record.
            record_id=f"{record_id_time(request.now)}#unverified-{request.execution_name}-{request.step_weight}",
        )
    )
    raise ApprovalUnverifiedError(why)
