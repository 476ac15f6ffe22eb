"""``fleetctl plan``: what the pre-scale reconciler would do at a given moment, changing nothing.

The reconciler's own planning (:func:`~fleetops.prescale.reconciler.load_calendar` and
:func:`~fleetops.prescale.reconciler.plan_endpoint`) runs on the live calendar and scalable targets with "now"
set to ``--at``. Unlike the function's ``dry_run`` it writes no audit record: a what-if is not a decision.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from fleetctl import awsclients, diffs, status
from fleetctl.errors import CliError, ExitCode
from fleetctl.stack import CALENDAR_TABLE, Stack

if TYPE_CHECKING:
    from fleetops.config import EndpointConfig, FleetConfig


class PlannedStep(BaseModel):
    at: datetime
    timezone: str
    min_capacity: int
    reason: str


class PlannedVariant(BaseModel):
    endpoint: str
    variant: str
    min_capacity_at: int
    timeline: list[PlannedStep]


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


def plan(stack: Stack, config: FleetConfig, endpoint_name: str | None, at: datetime) -> PlanReport:
    from fleetops.aws.autoscaling import AutoScaling
    from fleetops.prescale.calendar_table import CalendarTable
    from fleetops.prescale.reconciler import UnmanagedVariantError, load_calendar, plan_endpoint

    rows = CalendarTable(stack.output(CALENDAR_TABLE), resource=awsclients.dynamodb_resource()).one_off_entries()
    entries, invalid = load_calendar(config, rows)
    autoscaling = AutoScaling(client=awsclients.client("application-autoscaling"))
    variants: list[PlannedVariant] = []
    changes: list[PlannedChange] = []
    problems: list[str] = []
    for endpoint in _endpoints(config, stack, endpoint_name):
        try:
            planned, planned_changes = plan_endpoint(config, endpoint, entries, at, autoscaling)
        except UnmanagedVariantError as exc:
            problems.append(str(exc))
            continue
        variants += [
            PlannedVariant(
                endpoint=p.endpoint_name,
                variant=p.variant_name,
                min_capacity_at=p.current_min_capacity,
                timeline=[PlannedStep.model_validate(s.model_dump()) for s in p.timeline],
            )
            for p in planned
        ]
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
        variants=variants,
        changes=changes,
        invalid_entries=[SkippedEntry(source=b.source, name=b.name, errors=b.errors) for b in invalid],
        problems=problems,
    )
