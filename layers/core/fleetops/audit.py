"""The audit trail: who or what changed the fleet (or deliberately did not), why, before and after."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Outcome = Literal["applied", "planned", "skipped", "failed"]


class AuditRecord(BaseModel):
    """One decision about one endpoint.

    ``outcome`` is ``applied`` for a change made, ``planned`` for a change a dry run or kill switch
    held back, ``skipped`` for a deliberate non-action (cooldown, lease held by another writer, ...),
    ``failed`` for a change that AWS refused after retries.
    """

    model_config = ConfigDict(frozen=True)

    endpoint_name: str
    actor: str = Field(description="the writer: prescale, alarm_responder, canary_rollout, rollback, an operator")
    trigger: str = Field(description="what started it: schedule, calendar-change, an alarm name, an execution id")
    action: str
    reason: str
    outcome: Outcome
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    dry_run: bool = False
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    record_id: str = ""

    def with_id(self) -> AuditRecord:
        """Give the record its sort key: time first (so records sort by time), then a unique suffix."""
        if self.record_id:
            return self
        return self.model_copy(update={"record_id": f"{record_id_time(self.at)}#{uuid.uuid4().hex[:8]}"})


def record_id_time(at: datetime) -> str:
    """The time part of a record id: records sort by it, and a query from a time starts at it.

    Examples
    --------
    >>> record_id_time(datetime(2026, 12, 4, 20, 0, tzinfo=UTC))
    '2026-12-04T20:00:00.000000Z'
    """
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
