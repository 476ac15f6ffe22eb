"""Approval ids: opaque, short-lived, single-use stand-ins for a Step Functions task token.

The link an approver receives carries only the approval id. The table stores the task token under
the SHA-256 of that id (so a read of the table does not yield usable links), with an expiry and a
status that a conditional write moves from ``pending`` to ``used`` exactly once.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Decision = Literal["approve", "reject"]
RefusalReason = Literal["malformed", "unknown", "used", "expired"]

_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")  # secrets.token_urlsafe(32)

#: HTTP status per refusal, as the approval page answers it.
HTTP_STATUS: dict[RefusalReason, int] = {"malformed": 400, "unknown": 404, "used": 409, "expired": 410}


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
    status: Literal["pending", "used"] = "pending"
    decision: Decision | None = None
    decided_by: str | None = None
    decided_at: str | None = None


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


def check_usable(record: ApprovalRecord | None, now: datetime) -> ApprovalRecord:
    """Explain why an approval cannot be used, or return it when it can.

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
    return record
