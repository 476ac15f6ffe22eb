"""``fleetctl why``: the audit trail of one endpoint since a time, as a timeline."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from fleetctl import audit_trail, diffs, endpoints
from fleetctl.stack import Stack


class TrailEntry(BaseModel):
    at: datetime
    actor: str
    trigger: str
    action: str
    outcome: str
    reason: str
    dry_run: bool
    changes: list[str]
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class WhyReport(BaseModel):
    stack: str
    endpoint: str
    since: datetime
    now: datetime
    entries: list[TrailEntry]


def collect(stack: Stack, endpoint_name: str, since: datetime, now: datetime, actor: str | None) -> WhyReport:
    """Every audit record of the endpoint since ``since``; an endpoint neither audited nor existing is an error."""
    found = audit_trail.records(stack, endpoint_name, since=since)
    if not found and endpoint_name not in endpoints.existing() and not audit_trail.records(stack, endpoint_name):
        raise endpoints.not_found(endpoint_name, stack)
    entries = [
        TrailEntry(
            at=r.at,
            actor=r.actor,
            trigger=r.trigger,
            action=r.action,
            outcome=r.outcome,
            reason=r.reason,
            dry_run=r.dry_run,
            changes=diffs.changes(r.before, r.after),
            before=r.before,
            after=r.after,
        )
        for r in sorted(found, key=lambda r: (r.at, r.action))  # one run's records share a time: stable order
        if actor is None or r.actor == actor
    ]
    return WhyReport(stack=stack.name, endpoint=endpoint_name, since=since, now=now, entries=entries)
