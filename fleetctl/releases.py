"""``fleetctl calendar``: list, add and remove calendar entries, validated exactly as the reconciler validates them.

Validation is the reconciler's own :func:`~fleetops.prescale.reconciler.load_calendar` on the one row, so the
messages are the ones its plan, log and metric would give. Rows live in the calendar table (one-off releases
by default); the recurring entries and off-peak windows of ``fleet.yaml`` are listed, and change by pull request.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from fleetctl import awsclients
from fleetctl.errors import CliError, ExitCode
from fleetctl.stack import CALENDAR_TABLE, Stack

if TYPE_CHECKING:
    from fleetops.calendar import CalendarEntry
    from fleetops.config import FleetConfig
    from fleetops.prescale.calendar_table import CalendarTable

#: How far ahead "next" looks for an entry's next occurrence (a yearly entry's is within a year).
LOOKAHEAD = timedelta(days=400)


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


class CalendarListing(BaseModel):
    stack: str
    now: datetime
    config_version: str
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
    )


def listing(stack: Stack, config: FleetConfig, now: datetime) -> CalendarListing:
    """fleet.yaml's entries and the calendar table's rows, each with its next occurrence or its errors."""
    from fleetops.prescale.reconciler import load_calendar

    rows: list[CalendarRow] = []
    fleet_entries, fleet_invalid = load_calendar(config, [])
    for fleet_entry in fleet_entries:
        rows.append(_row("fleet.yaml", None, fleet_entry.model_dump(), fleet_entry, [], now))
    for bad in fleet_invalid:
        rows.append(_row(bad.source, None, {"name": bad.name}, None, bad.errors, now))
    for event_id, raw in sorted(_table(stack).rows_by_id().items()):
        entry, errors = validate(config, raw)
        rows.append(_row("calendar-table", event_id, raw, entry, errors, now))
    return CalendarListing(stack=stack.name, now=now, config_version=config.version, entries=rows)


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
