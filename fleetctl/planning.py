"""``fleetctl plan``: what the pre-scale reconciler would do at a given moment, changing nothing.

The reconciler's own planning (:func:`~fleetops.prescale.reconciler.load_calendar` and
:func:`~fleetops.prescale.reconciler.plan_endpoint`) runs on the live calendar, scalable targets and each
variant's ``Invocations`` history with "now" set to ``--at``, so the what-if plans exactly as the function does:
from the variant's own history when there is enough of it, else from the configured levels. Unlike the
function's ``dry_run`` it writes no audit record: a what-if is not a decision.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from fleetctl import awsclients, diffs, status
from fleetctl.errors import CliError, ExitCode
from fleetctl.stack import CALENDAR_TABLE, Stack

if TYPE_CHECKING:
    from fleetops.calendar import CalendarEntry
    from fleetops.config import EndpointConfig, FleetConfig
    from fleetops.prescale.models import Change, VariantPlan


class PlannedStep(BaseModel):
    at: datetime
    timezone: str
    min_capacity: int
    reason: str


class PlannedForecast(BaseModel):
    """Where the variant's plan came from: its own ``Invocations`` history, or the configured levels and why."""

    source: Literal["history", "configuration"]
    why: str
    history_days: float
    weekly_growth: float
    level_ratio: float  # today's level over the expected one beyond noise, else 1 (fleetops ForecastSummary)
    configured_baseline_rps: float
    forecast_low_rps: float | None  # the horizon's quietest and busiest everyday slot (history only)
    forecast_peak_rps: float | None


class PlannedEventSize(BaseModel):
    """A calendar entry's configured multiplier, the size learned from its past occurrences, and which was used."""

    name: str
    kind: str
    configured: float
    learned: float | None
    occurrences: int
    early_minutes: int
    used: Literal["learned", "configured"]
    why: str


class PlannedOverCap(BaseModel):
    """A stretch whose forecast needs more instances than the variant's cap: requests beyond the cap would fail."""

    start: datetime
    end: datetime
    peak_instances: int
    cap: int
    requests_at_risk: int


class PlannedRate(BaseModel):
    """The requests/s per instance the plan divided by: fleet.yaml's, or lower, what the instances served."""

    configured_rps: float
    served_rps: float | None  # the median served rate of the latest minutes with vLLM's queue full
    saturated_minutes: int
    used_rps: float
    why: str


class PlannedVariant(BaseModel):
    endpoint: str
    variant: str
    min_capacity_at: int
    timeline: list[PlannedStep]
    forecast: PlannedForecast | None
    event_sizes: list[PlannedEventSize]
    over_cap: list[PlannedOverCap]
    merged_steps: list[PlannedStep]  # merged into their neighbours to stay within the scheduled-action quota
    served_rate: PlannedRate | None  # None: the configured rate, no history read


class PlannedChange(BaseModel):
    kind: str
    endpoint: str
    variant: str
    name: str
    reason: str
    changes: list[str]


class SkippedEntry(BaseModel):
    source: str
    name: str
    errors: list[str]


class PlanReport(BaseModel):
    stack: str
    at: datetime
    config_version: str
    kill_switch_engaged: bool
    dry_run: bool
    max_scheduled_actions: int
    variants: list[PlannedVariant]
    changes: list[PlannedChange]
    invalid_entries: list[SkippedEntry]
    problems: list[str]


def _endpoints(config: FleetConfig, stack: Stack, endpoint_name: str | None) -> tuple[EndpointConfig, ...]:
    managed = config.managed_by(stack.environment)
    if endpoint_name is None:
        return managed
    found = [e for e in managed if e.name == endpoint_name]
    if not found:
        raise CliError(
            ExitCode.NOT_FOUND,
            f"endpoint {endpoint_name!r} is not one this stack pre-scales ({stack.environment or 'any'} endpoints "
            "of fleet.yaml)",
            f"managed here: {', '.join(e.name for e in managed) or 'none'} (pass --fleet for another fleet.yaml)",
        )
    return tuple(found)


def _side(value: Any) -> dict[str, Any] | None:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def plan_endpoint(
    config: FleetConfig, endpoint: EndpointConfig, entries: list[CalendarEntry], at: datetime
) -> tuple[list[VariantPlan], list[Change]]:
    """The reconciler's own plan of ``endpoint`` at ``at``, with its readers on fleetctl's clients (read-only).

    Raises :class:`~fleetops.prescale.reconciler.UnmanagedVariantError` when a variant has no scalable target.
    """
    from fleetops.aws.autoscaling import AutoScaling
    from fleetops.prescale.demand_history import DemandHistory
    from fleetops.prescale.reconciler import plan_endpoint as reconciler_plan

    autoscaling = AutoScaling(client=awsclients.client("application-autoscaling"))
    history = DemandHistory(client=awsclients.client("cloudwatch"))
    return reconciler_plan(config, endpoint, entries, at, autoscaling, history)


def configured_why(why: str) -> str:
    """A configured plan's reason without the reconciler's trailing ": configured levels" (the caller says it).

    Examples
    --------
    >>> configured_why("5.0 days of Invocations history, 7 needed: configured levels")
    '5.0 days of Invocations history, 7 needed'
    """
    return why.removesuffix(": configured levels")


def _steps(steps: list[Any]) -> list[PlannedStep]:
    return [PlannedStep.model_validate(s.model_dump()) for s in steps]


def _variant(p: VariantPlan) -> PlannedVariant:
    return PlannedVariant(
        endpoint=p.endpoint_name,
        variant=p.variant_name,
        min_capacity_at=p.current_min_capacity,
        timeline=_steps(p.timeline),
        forecast=PlannedForecast.model_validate(p.forecast.model_dump()) if p.forecast is not None else None,
        event_sizes=[PlannedEventSize.model_validate(e.model_dump()) for e in p.event_sizes],
        over_cap=[PlannedOverCap.model_validate(o.model_dump()) for o in p.over_cap],
        merged_steps=_steps(p.dropped_steps),
        served_rate=PlannedRate.model_validate(p.served_capacity.model_dump()) if p.served_capacity else None,
    )


def plan(stack: Stack, config: FleetConfig, endpoint_name: str | None, at: datetime) -> PlanReport:
    from fleetops.prescale.calendar_table import CalendarTable
    from fleetops.prescale.reconciler import UnmanagedVariantError, load_calendar

    rows = CalendarTable(stack.output(CALENDAR_TABLE), resource=awsclients.dynamodb_resource()).one_off_entries()
    entries, invalid = load_calendar(config, rows)
    variants: list[PlannedVariant] = []
    changes: list[PlannedChange] = []
    problems: list[str] = []
    for endpoint in _endpoints(config, stack, endpoint_name):
        try:
            planned, planned_changes = plan_endpoint(config, endpoint, entries, at)
        except UnmanagedVariantError as exc:
            problems.append(str(exc))
            continue
        variants += [_variant(p) for p in planned]
        changes += [
            PlannedChange(
                kind=c.kind,
                endpoint=c.endpoint_name,
                variant=c.variant_name,
                name=c.name,
                reason=c.reason,
                changes=diffs.changes(_side(c.before), _side(c.after)),
            )
            for c in planned_changes
        ]
    return PlanReport(
        stack=stack.name,
        at=at,
        config_version=config.version,
        kill_switch_engaged=status.kill_switch_engaged(stack),
        dry_run=stack.dry_run,
        max_scheduled_actions=config.prescale.max_scheduled_actions,
        variants=variants,
        changes=changes,
        invalid_entries=[SkippedEntry(source=b.source, name=b.name, errors=b.errors) for b in invalid],
        problems=problems,
    )
