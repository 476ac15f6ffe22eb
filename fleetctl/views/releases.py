"""``calendar`` for people."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from fleetctl import timefmt
from fleetctl.releases import CalendarChange, CalendarListing, CalendarRow, EntrySize, PlanSource
from fleetctl.views.common import section, table


def _next(row: CalendarRow) -> str:
    if row.next_start is None or row.next_end is None:
        return "-"
    minutes = int((row.next_end - row.next_start).total_seconds() // 60)
    local = timefmt.local(row.next_start, row.timezone) if row.timezone else ""
    return f"{timefmt.utc(row.next_start)}\n{local}, {minutes} min"


def plan_line(plan: PlanSource) -> Text:
    """Where an endpoint's plan comes from (and so its entries' sizes), in one line."""
    where = f"{plan.endpoint}/{plan.variant}"
    if plan.source == "history":
        return Text(f"{where}: plan from {plan.why}")
    if plan.source == "configuration":
        return Text(f"{where}: configured levels and sizes ({plan.why})")
    return Text(f"{where}: no plan, configured sizes ({plan.why})", style="yellow")


def _used(row: CalendarRow, size: EntrySize, source: PlanSource | None) -> str:
    configured = f"x{row.multiplier:g}" if row.multiplier is not None else "-"
    if size.used == "learned":
        return f"learned x{size.learned:g}"
    if size.used == "forecast":
        return "forecast (off-peak)"
    # The endpoint's line says why already when none of its entries can be learned.
    specific = source is None or source.source == "history"
    return f"configured {configured}: {size.why}" if specific else f"configured {configured}"


def _sizes(listing: CalendarListing) -> RenderableType:
    sources = {(p.endpoint, p.variant): p for p in listing.plans}
    sizes = table("entry", "endpoint/variant", "configured", "learned", "past occurrences", "plan used")
    for row in listing.entries:
        for size in row.sizes:
            sizes.add_row(
                row.name,
                f"{size.endpoint}/{size.variant}",
                f"x{row.multiplier:g}" if row.multiplier is not None else "-",
                f"x{size.learned:g}" if size.learned is not None else "-",
                str(size.occurrences),
                _used(row, size, sources.get((size.endpoint, size.variant))),
            )
    lines = [plan_line(p) for p in listing.plans] or [Text("no endpoint is managed by this stack")]
    return section(f"sizes the plans give at {timefmt.utc(listing.now)}", Group(*lines, sizes))


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
    return Group(title, rows, Text(""), _sizes(listing))


def render_change(change: CalendarChange) -> RenderableType:
    lines = [Text(f"{change.action} {change.event_id}: {change.entry.name}", style="bold")]
    if change.entry.valid and change.action != "removed":
        lines.append(Text(f"next: {_next(change.entry).replace(chr(10), ' (')})  x{change.entry.multiplier:g}"))
        lines.append(Text("the reconciler picks it up within a minute; see it with: fleetctl plan --at <time>"))
    elif change.action == "removed":
        lines.append(Text("the reconciler removes its scheduled actions within a minute"))
    lines += [Text(f"warning: {w}", style="yellow") for w in change.warnings]
    return Group(*lines)
