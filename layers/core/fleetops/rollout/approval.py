"""Approval ids: opaque, short-lived, single-use stand-ins for a Step Functions task token.

The link an approver receives carries only the approval id. The table stores the task token under
the SHA-256 of that id (so a read of the table does not yield usable links), with an expiry (the moment
Step Functions gives up waiting), who requested the rollout, and a status that conditional writes move
from ``pending`` to ``claimed`` (one caller is sending its decision) to ``used`` once Step Functions took it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fleetops.rollout.approval_identity import not_distinct, person

Decision = Literal["approve", "reject"]
RefusalReason = Literal["malformed", "unknown", "used", "expired", "own_rollout", "claimed"]
Status = Literal["pending", "claimed", "used"]

_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")  # secrets.token_urlsafe(32)

#: HTTP status per refusal, as the approval page answers it.
HTTP_STATUS: dict[RefusalReason, int] = {
    "malformed": 400,
    "unknown": 404,
    "used": 409,
    "expired": 410,
    "own_rollout": 403,
    "claimed": 409,
}

#: How long a claim keeps other approvers out while its caller sends the decision to Step Functions. A caller
#: that died between claim and send leaves a claim that lapses after this, so the approval is not lost.
CLAIM_SECONDS = 60


class ApprovalRefusedError(Exception):
    """The approval id cannot be used; ``reason`` says why in one word, the message for a person."""

    def __init__(self, reason: RefusalReason, message: str) -> None:
        self.reason: RefusalReason = reason
        self.http_status = HTTP_STATUS[reason]
        super().__init__(message)


class ApprovalRecord(BaseModel):
    """One pending (or used) approval as stored in the approval table."""

    model_config = ConfigDict(frozen=True)

    approval_key: str = Field(description="sha256 hex of the approval id")
    task_token: str = Field(repr=False)
    rollout_id: str
    endpoint_name: str
    step_weight: int
    summary: str
    expires_at: int = Field(description="epoch seconds")
    requested_by: str = Field(default="", description="the signed caller who requested the rollout, as recorded")
    execution_id: str = Field(default="", description="the waiting execution (its context, not its input)")
    status: Status = "pending"
    decision: Decision | None = None
    decided_by: str | None = None
    decided_at: str | None = None
    claimed_until: int | None = Field(default=None, description="epoch seconds; a lapsed claim frees the approval")


def new_approval_id() -> str:
    """A fresh, unguessable approval id (256 bits, URL-safe).

    Examples
    --------
    >>> len(new_approval_id())
    43
    """
    return secrets.token_urlsafe(32)


def approval_key(approval_id: str) -> str:
    """The table key of an approval id; refuses anything that is not shaped like one.

    Examples
    --------
    >>> approval_key("nope")
    Traceback (most recent call last):
    ...
    fleetops.rollout.approval.ApprovalRefusedError: this approval link is not valid
    """
    if not _ID.fullmatch(approval_id or ""):
        raise ApprovalRefusedError("malformed", "this approval link is not valid")
    return hashlib.sha256(approval_id.encode()).hexdigest()


def check_usable(
    record: ApprovalRecord | None, now: datetime, caller: str | None = None, decision: Decision | None = None
) -> ApprovalRecord:
    """Explain why an approval cannot be used (by ``caller`` for ``decision``), or return it when it can.

    A claim is another caller's decision being sent to Step Functions; the same caller retrying the same
    decision may go on (its send failed or its answer was lost), anyone may once the claim has lapsed.

    Examples
    --------
    >>> check_usable(None, datetime.now())
    Traceback (most recent call last):
    ...
    fleetops.rollout.approval.ApprovalRefusedError: unknown approval link
    """
    if record is None:
        raise ApprovalRefusedError("unknown", "unknown approval link")
    if record.status == "used":
        raise ApprovalRefusedError(
            "used",
            f"this approval link was already used: {record.decision} by {record.decided_by} at {record.decided_at}",
        )
    if int(now.timestamp()) >= record.expires_at:
        raise ApprovalRefusedError("expired", "this approval link has expired; the rollout has moved on")
    claimed = record.status == "claimed" and int(now.timestamp()) < (record.claimed_until or 0)
    if claimed and (record.decided_by, record.decision) != (caller, decision):
        raise ApprovalRefusedError(
            "claimed",
            f"{record.decided_by} is submitting '{record.decision}' for this step right now; "
            "look at the rollout again in a minute",
        )
    return record


def check_not_requester(record: ApprovalRecord, caller: str) -> None:
    """Refuse a decision by the person who requested the rollout, or by one who may be them (a shared role).

    Examples
    --------
    >>> rec = ApprovalRecord(approval_key="k", task_token="t", rollout_id="v7", endpoint_name="e", step_weight=5,
    ...     summary="", expires_at=0, requested_by="arn:aws:iam::123456789012:user/alice")
    >>> check_not_requester(rec, "arn:aws:sts::123456789012:user/alice")
    Traceback (most recent call last):
    ...
    fleetops.rollout.approval.ApprovalRefusedError: arn:aws:sts::123456789012:user/alice requested rollout v7 and \
may not decide its approvals: another person must approve or reject it
    """
    if not record.requested_by:  # a row written before requesters were recorded: nobody can tell who asked
        raise ApprovalRefusedError(
            "own_rollout",
            f"the approval of rollout {record.rollout_id} does not say who requested it; "
            "it cannot be decided here (let it time out, or abort the rollout)",
        )
    why = not_distinct(person(record.requested_by), person(caller), f"rollout {record.rollout_id}")
    if why:
        raise ApprovalRefusedError("own_rollout", why)


def decision_deadline(entered: datetime, timeout_seconds: int, heartbeat_seconds: int | None) -> int:
    """When Step Functions stops waiting for the approval task (epoch seconds).

    The task fails at ``TimeoutSeconds`` after the state was entered, or at ``HeartbeatSeconds`` when no
    heartbeat arrives first; nothing sends heartbeats for an approval, so the sooner of the two is the end.

    Examples
    --------
    >>> from datetime import UTC
    >>> decision_deadline(datetime(2026, 12, 4, 10, 0, tzinfo=UTC), 86400, 14400) - 1796378400
    14400
    """
    limits = [timeout_seconds] + ([heartbeat_seconds] if heartbeat_seconds else [])
    return int(entered.timestamp()) + min(limits)
