"""``fleetctl calendar``: list, add and remove calendar entries, validated exactly as the reconciler validates them.

Validation is the reconciler's own :func:`~fleetops.prescale.reconciler.load_calendar` on the one row, so the
messages are the ones its plan, log and metric would give. Rows live in the calendar table (one-off releases
by default); the recurring entries and off-peak windows of ``fleet.yaml`` are listed, and change by pull request.

``calendar list`` also shows, for the primary variant of each endpoint the stack manages, the size its plan gives
each entry now: learned from the entry's past occurrences in the variant's ``Invocations`` history, or the
configured multiplier and why. It is the reconciler's own :func:`~fleetops.prescale.reconciler.plan_endpoint`,
read-only (:func:`fleetctl.planning.plan_endpoint`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from fleetctl import aws_errors, awsclients, planning
from fleetctl.errors import CliError, ExitCode
from fleetctl.stack import CALENDAR_TABLE, Stack

if TYPE_CHECKING:
    from fleetops.calendar import CalendarEntry
    from fleetops.config import EndpointConfig, FleetConfig, VariantConfig
    from fleetops.prescale.calendar_table import CalendarTable
    from fleetops.prescale.models import VariantPlan

#: How far ahead "next" looks for an entry's next occurrence (a yearly entry's is within a year).
LOOKAHEAD = timedelta(days=400)


class EntrySize(BaseModel):
    """The size one endpoint's plan gives an entry now: learned from its past occurrences, or configured."""

    endpoint: str
    variant: str
    learned: float | None
    used: Literal["learned", "configured", "forecast"]  # forecast: an off-peak window, left to the history
    occurrences: int
    why: str


class PlanSource(BaseModel):
    """Where the plan of an endpoint's primary variant comes from now, or why none can be made."""

    endpoint: str
    variant: str
    source: Literal["history", "configuration", "none"]
    why: str


class CalendarRow(BaseModel):
    source: str
    event_id: str | None
    name: str
    kind: str | None
    timezone: str | None
    multiplier: float | None
    reason: str
    endpoints: list[str]
    next_start: datetime | None
    next_end: datetime | None
    valid: bool
    errors: list[str]
    sizes: list[EntrySize] = []  # calendar list only: one per managed endpoint the entry applies to


class CalendarListing(BaseModel):
    stack: str
    now: datetime
    config_version: str
    plans: list[PlanSource]
    entries: list[CalendarRow]


class CalendarChange(BaseModel):
    stack: str
    action: str
    event_id: str
    entry: CalendarRow
    warnings: list[str]


def _table(stack: Stack) -> CalendarTable:
    from fleetops.prescale.calendar_table import CalendarTable

    return CalendarTable(stack.output(CALENDAR_TABLE), resource=awsclients.dynamodb_resource())


def validate(config: FleetConfig, row: dict[str, Any]) -> tuple[CalendarEntry | None, list[str]]:
    """The entry a calendar-table row becomes, or the reconciler's reasons for skipping it."""
    from fleetops.prescale.reconciler import load_calendar

    only_this_row = config.model_copy(update={"recurring": (), "off_peak": ()})
    entries, invalid = load_calendar(only_this_row, [row])
    return (entries[0] if entries else None), [error for bad in invalid for error in bad.errors]


def _row(
    source: str,
    event_id: str | None,
    raw: dict[str, Any],
    entry: CalendarEntry | None,
    errors: list[str],
    now: datetime,
    sizes: list[EntrySize] | None = None,
) -> CalendarRow:
    upcoming = entry.occurrences(now, now + LOOKAHEAD) if entry is not None else []
    first = min(upcoming, key=lambda o: o.start) if upcoming else None
    return CalendarRow(
        source=source,
        event_id=event_id,
        name=str(raw.get("name") or event_id or "?"),
        kind=entry.kind if entry is not None else (str(raw["kind"]) if raw.get("kind") else None),
        timezone=entry.timezone if entry is not None else None,
        multiplier=entry.multiplier if entry is not None else None,
        reason=entry.reason if entry is not None else str(raw.get("reason", "")),
        endpoints=list(entry.endpoints) if entry is not None else [],
        next_start=first.start if first else None,
        next_end=first.end if first else None,
        valid=entry is not None,
        errors=errors,
        sizes=sizes or [],
    )


def _primary(endpoint: EndpointConfig) -> VariantConfig:
    return endpoint.primary_variant() or endpoint.variants[0]


def _plan_source(
    config: FleetConfig, endpoint: EndpointConfig, entries: list[CalendarEntry], now: datetime
) -> tuple[PlanSource, VariantPlan | None]:
    """The plan of ``endpoint``'s primary variant at ``now`` and where it comes from (``None``: no plan)."""
    from botocore.exceptions import ClientError

    from fleetops.prescale.reconciler import UnmanagedVariantError

    variant = _primary(endpoint)
    try:
        plans, _ = planning.plan_endpoint(config, endpoint, entries, now)
    except UnmanagedVariantError:
        why = "a variant has no scalable target: the reconciler cannot plan this endpoint"
        return PlanSource(endpoint=endpoint.name, variant=variant.name, source="none", why=why), None
    except ClientError as exc:  # the calendar is still worth listing to someone who may not read the targets
        error = aws_errors.translate(exc)
        why = f"could not plan it: {error.message if error is not None else exc}"
        return PlanSource(endpoint=endpoint.name, variant=variant.name, source="none", why=why), None
    plan = next(p for p in plans if p.variant_name == variant.name)
    forecast = plan.forecast
    if forecast is None or forecast.source == "configuration":
        why = planning.configured_why(forecast.why) if forecast is not None else "no forecast summary"
        return PlanSource(endpoint=endpoint.name, variant=variant.name, source="configuration", why=why), plan
    why = f"{forecast.history_days:.1f} days of its own Invocations"
    return PlanSource(endpoint=endpoint.name, variant=variant.name, source="history", why=why), plan


def _sized(source: PlanSource, used: str, why: str, learned: float | None = None, occurrences: int = 0) -> EntrySize:
    return EntrySize.model_validate(
        {"endpoint": source.endpoint, "variant": source.variant, "learned": learned, "used": used}
        | {"occurrences": occurrences, "why": why}
    )


def _size(entry: CalendarEntry, source: PlanSource, plan: VariantPlan | None) -> EntrySize:
    """The size ``plan`` gives ``entry``: the plan's learned or configured size, or the configured one and why."""
    if plan is None or source.source != "history":
        return _sized(source, "configured", source.why)
    if entry.multiplier < 1:
        return _sized(source, "forecast", "an off-peak window: the forecast from the history has the quiet hours")
    size = next((s for s in plan.event_sizes if s.name == entry.name), None)
    if size is None:
        return _sized(source, "configured", "no occurrence in this plan's window")
    return _sized(source, size.used, size.why, size.learned, size.occurrences)


def _applying(entries: list[CalendarEntry], endpoint_name: str) -> dict[str, CalendarEntry]:
    """The entries that apply to the endpoint, one per name (the reconciler sizes entries by name)."""
    found: dict[str, CalendarEntry] = {}
    for entry in entries:
        if not entry.endpoints or endpoint_name in entry.endpoints:
            found.setdefault(entry.name, entry)
    return found


def entry_sizes(
    config: FleetConfig, environment: str | None, entries: list[CalendarEntry], now: datetime
) -> tuple[list[PlanSource], dict[str, list[EntrySize]]]:
    """Each managed endpoint's plan source, and by entry name the size each endpoint's plan gives the entry."""
    sources: list[PlanSource] = []
    sizes: dict[str, list[EntrySize]] = {}
    for endpoint in config.managed_by(environment):
        source, plan = _plan_source(config, endpoint, entries, now)
        sources.append(source)
        for name, entry in _applying(entries, endpoint.name).items():
            sizes.setdefault(name, []).append(_size(entry, source, plan))
    return sources, sizes


def listing(stack: Stack, config: FleetConfig, now: datetime) -> CalendarListing:
    """fleet.yaml's entries and the calendar table's rows, each with its next occurrence or its errors, and the size
    each managed endpoint's plan gives it now."""
    from fleetops.prescale.reconciler import load_calendar

    table_rows = _table(stack).rows_by_id()
    everything, _ = load_calendar(config, sorted(table_rows.values(), key=lambda e: str(e["name"])))
    plans, sizes = entry_sizes(config, stack.environment, everything, now)
    rows: list[CalendarRow] = []
    fleet_entries, fleet_invalid = load_calendar(config, [])
    for fleet_entry in fleet_entries:
        sized = sizes.get(fleet_entry.name)
        rows.append(_row("fleet.yaml", None, fleet_entry.model_dump(), fleet_entry, [], now, sized))
    for bad in fleet_invalid:
        rows.append(_row(bad.source, None, {"name": bad.name}, None, bad.errors, now))
    for event_id, raw in sorted(table_rows.items()):
        entry, errors = validate(config, raw)
        sized = sizes.get(entry.name) if entry is not None else None
        rows.append(_row("calendar-table", event_id, raw, entry, errors, now, sized))
    return CalendarListing(stack=stack.name, now=now, config_version=config.version, plans=plans, entries=rows)


def event_id_for(name: str) -> str:
    """A row key from a release's name.

    Examples
    --------
    >>> event_id_for("One Piece ch. 1100")
    'one-piece-ch-1100'
    """
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "release"


def add(
    stack: Stack, config: FleetConfig, event_id: str, row: dict[str, Any], replace: bool, now: datetime
) -> CalendarChange:
    """Validate ``row`` as the reconciler will, then write it; an invalid row is refused with every reason."""
    entry, errors = validate(config, row)
    if entry is None:
        raise CliError(
            ExitCode.USAGE,
            f"calendar entry {row.get('name')!r} is invalid (the reconciler would skip it):\n    "
            + "\n    ".join(errors),
            f"fix it and run the command again; endpoints in fleet.yaml: {', '.join(sorted(config.endpoint_names()))}",
        )
    table = _table(stack)
    existing = table.rows_by_id()
    if event_id in existing and not replace:
        raise CliError(
            ExitCode.CONFLICT,
            f"calendar entry {event_id!r} exists already ({existing[event_id].get('name')})",
            "pass --replace to overwrite it, or --id to add another",
        )
    table.put(event_id, row)
    added = _row("calendar-table", event_id, row, entry, [], now)
    warnings = []
    if added.next_start is None:
        warnings.append("it has no occurrence from now on (in the past?): the reconciler will not scale for it")
    return CalendarChange(
        stack=stack.name,
        action="replaced" if event_id in existing else "added",
        event_id=event_id,
        entry=added,
        warnings=warnings,
    )


def remove(stack: Stack, config: FleetConfig, event_id: str, now: datetime) -> CalendarChange:
    table = _table(stack)
    existing = table.rows_by_id()
    if event_id not in existing:
        raise CliError(
            ExitCode.NOT_FOUND,
            f"no calendar entry {event_id!r} in the calendar table",
            f"ids there: {', '.join(sorted(existing)) or 'none'} (fleet.yaml entries change by pull request)",
        )
    raw = existing[event_id]
    entry, errors = validate(config, raw)
    table.delete(event_id)
    return CalendarChange(
        stack=stack.name,
        action="removed",
        event_id=event_id,
        entry=_row("calendar-table", event_id, raw, entry, errors, now),
        warnings=[],
    )
