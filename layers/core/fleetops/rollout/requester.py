"""Who requested a rollout, as recorded by the request function before it started the execution.

Step Functions does not say who called StartExecution, and the execution's input is whatever that caller
wrote. So the request function records the request (the execution's name, its exact input and the signed
caller) in the approval table *before* it starts the execution, and the approval steps read the requester
from that record, never from the input: an execution someone started directly, or one whose input differs
from what was recorded under its name, has no requester and cannot be approved.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: Key prefix of a rollout's request record in the approval table (approvals are 64 hex characters).
ROLLOUT_KEY_PREFIX = "rollout#"

#: How long a request record is kept: as long as Step Functions keeps an ended execution's name, so no other
#: execution can take the name while the record still vouches for it.
RECORD_SECONDS = 90 * 86400


class RequesterUnknownError(Exception):
    """The execution was not started by the request function with this input: nobody may approve it."""


class RolloutRecord(BaseModel):
    """The request as the request function recorded it (approval table, key ``rollout#<execution name>``)."""

    model_config = ConfigDict(frozen=True)

    approval_key: str
    rollout_id: str
    requested_by: str
    execution_input: str = Field(description="the execution's input JSON, exactly as started")
    expires_at: int = Field(description="epoch seconds (the table's TTL)")


def rollout_key(execution_name: str) -> str:
    """The approval table key of the request record of execution ``execution_name``.

    Examples
    --------
    >>> rollout_key("llama-q4-v7")
    'rollout#llama-q4-v7'
    """
    return f"{ROLLOUT_KEY_PREFIX}{execution_name}"


def new_record(rollout_id: str, requested_by: str, execution_input: str, now: datetime) -> RolloutRecord:
    """The record of a request about to be started as execution ``rollout_id``."""
    return RolloutRecord(
        approval_key=rollout_key(rollout_id),
        rollout_id=rollout_id,
        requested_by=requested_by,
        execution_input=execution_input,
        expires_at=int(now.timestamp()) + RECORD_SECONDS,
    )


def recorded_requester(record: RolloutRecord | None, execution_name: str, execution_input: Any, now: datetime) -> str:
    """The requester the request function recorded for this execution, checked against the execution itself.

    ``execution_name`` and ``execution_input`` come from the execution's context (``$$.Execution``), which the
    caller of StartExecution cannot change afterwards.

    Examples
    --------
    >>> from datetime import UTC
    >>> now = datetime(2026, 11, 21, tzinfo=UTC)
    >>> rec = new_record("v7", "arn:aws:iam::123456789012:user/hana", '{"rollout_id": "v7"}', now)
    >>> recorded_requester(rec, "v7", {"rollout_id": "v7"}, now)
    'arn:aws:iam::123456789012:user/hana'
    >>> recorded_requester(rec, "v7", {"rollout_id": "v7", "requested_by": "x"}, now)
    Traceback (most recent call last):
    ...
    fleetops.rollout.requester.RequesterUnknownError: execution v7 is not the request recorded under its name \
(its input differs): it was not started through the rollout request URL, so nobody may approve it
    """
    if record is None or record.expires_at <= int(now.timestamp()):
        raise RequesterUnknownError(
            f"execution {execution_name} has no recorded request: it was not started through the rollout request "
            "URL, so nobody may approve it"
        )
    try:
        recorded = json.loads(record.execution_input)
    except ValueError:
        recorded = None
    if record.approval_key != rollout_key(execution_name) or recorded != execution_input:
        raise RequesterUnknownError(
            f"execution {execution_name} is not the request recorded under its name (its input differs): it was "
            "not started through the rollout request URL, so nobody may approve it"
        )
    return record.requested_by
