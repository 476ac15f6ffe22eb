"""``calendar`` for people."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from fleetctl import timefmt
from fleetctl.releases import CalendarChange, CalendarListing, CalendarRow
from fleetctl.views.common import table


def _next(row: CalendarRow) -> str:
    if row.next_start is None or row.next_end is None:
        return "-"
    minutes = int((row.next_end - row.next_start).total_seconds() // 60)
    local = timefmt.local(row.next_start, row.timezone) if row.timezone else ""
    return f"{timefmt.utc(row.next_start)}\n{local}, {minutes} min"


def render_listing(listing: CalendarListing) -> RenderableType:
    rows = table("source / id", "name", "kind", "next", "x", "endpoints", "reason / problem")
    for row in listing.entries:
        problem = Text("\n".join(row.errors), style="bold red") if not row.valid else Text(row.reason)
        rows.add_row(
            row.event_id or row.source,
            row.name,
            row.kind or "?",
            _next(row),
            f"{row.multiplier:g}" if row.multiplier is not None else "-",
            ", ".join(row.endpoints) or "all",
            problem,
        )
    invalid = sum(not r.valid for r in listing.entries)
    title = Text(
        f"calendar of stack {listing.stack} (fleet.yaml {listing.config_version}) at {timefmt.utc(listing.now)}: "
        f"{len(listing.entries)} entries, {invalid} invalid (skipped by the reconciler)",
        style="bold",
    )
    return Group(title, rows)


def render_change(change: CalendarChange) -> RenderableType:
    lines = [Text(f"{change.action} {change.event_id}: {change.entry.name}", style="bold")]
    if change.entry.valid and change.action != "removed":
        lines.append(Text(f"next: {_next(change.entry).replace(chr(10), ' (')})  x{change.entry.multiplier:g}"))
        lines.append(Text("the reconciler picks it up within a minute; see it with: fleetctl plan --at <time>"))
    elif change.action == "removed":
        lines.append(Text("the reconciler removes its scheduled actions within a minute"))
    lines += [Text(f"warning: {w}", style="yellow") for w in change.warnings]
    return Group(*lines)
