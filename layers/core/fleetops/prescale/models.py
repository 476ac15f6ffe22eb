"""What the reconciler decided: desired scheduled actions, the changes to reach them, skipped entries."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fleetops.calendar import InvalidEntry
from fleetops.capacity import ScheduledAction
from fleetops.validation import StrictModel

ACTION_PREFIX = "prescale-"


class Step(StrictModel):
    """One point of a variant's desired MinCapacity timeline."""

    at: datetime  # UTC
    min_capacity: int
    timezone: str
    reason: str


class Change(StrictModel):
    kind: Literal["create", "update", "delete", "raise_min"]
    endpoint_name: str
    variant_name: str
    name: str
    reason: str
    before: ScheduledAction | dict[str, int] | None = None
    after: ScheduledAction | dict[str, int] | None = None
    outcome: Literal["planned", "applied", "skipped", "failed"] = "planned"
    error: str = ""


class VariantPlan(StrictModel):
    endpoint_name: str
    variant_name: str
    current_min_capacity: int
    timeline: list[Step]
    desired: list[ScheduledAction]


class Plan(StrictModel):
    """The reconciler's answer: returned by the handler, logged, and the source of the audit records."""

    now: datetime
    trigger: str
    config_version: str
    dry_run: bool
    kill_switch: bool
    applied: bool
    variants: list[VariantPlan]
    changes: list[Change]
    invalid_entries: list[InvalidEntry]
    deferred_endpoints: list[str] = []
