"""What the reconciler decided: desired scheduled actions, the changes to reach them, skipped entries."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fleetops.calendar import InvalidEntry
from fleetops.capacity import ScheduledAction
from fleetops.prescale.event_sizes import EventSize
from fleetops.prescale.served_capacity import ServedCapacity
from fleetops.validation import StrictModel

ACTION_PREFIX = "prescale-"
ACTOR = "prescale"  # the audit trail's name for the pre-scale reconciler


class Step(StrictModel):
    """One point of a variant's desired MinCapacity timeline."""

    at: datetime  # UTC
    min_capacity: int
    timezone: str
    reason: str


class Change(StrictModel):
    kind: Literal["create", "update", "delete", "raise_min", "lower_min", "release_min"]
    endpoint_name: str
    variant_name: str
    name: str
    reason: str
    before: ScheduledAction | dict[str, int] | None = None
    after: ScheduledAction | dict[str, int] | None = None
    outcome: Literal["planned", "applied", "skipped", "failed"] = "planned"
    error: str = ""


class ForecastSummary(StrictModel):
    """Where a variant's plan came from: its own history (and what the forecast saw) or the configured levels."""

    source: Literal["history", "configuration"]
    why: str
    history_days: float = 0.0
    weekly_growth: float = 1.0
    # The last two hours over their forecast (or, from a short history, the configured level) where off it beyond
    # noise, else 1.0: below 1 it lowers the everyday hours ahead; above 1 it raises the events ahead.
    level_ratio: float = 1.0
    configured_baseline_rps: float
    forecast_low_rps: float | None = None  # the horizon's quietest and busiest everyday slot
    forecast_peak_rps: float | None = None


class OverCap(StrictModel):
    """A stretch of the horizon whose forecast needs more instances than the variant's cap allows."""

    start: datetime
    end: datetime
    peak_instances: int
    cap: int
    requests_at_risk: int  # forecast requests beyond what ``cap`` instances serve at their rated rate


class VariantPlan(StrictModel):
    endpoint_name: str
    variant_name: str
    current_min_capacity: int
    timeline: list[Step]
    desired: list[ScheduledAction]
    forecast: ForecastSummary | None = None
    event_sizes: list[EventSize] = []
    over_cap: list[OverCap] = []
    dropped_steps: list[Step] = []  # merged into their neighbours to stay within the scheduled-action quota
    served_capacity: ServedCapacity | None = None  # the rate per instance the plan divided by (None: configured)


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
