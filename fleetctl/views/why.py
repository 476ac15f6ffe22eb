"""``why`` for people: a timeline, oldest first, one block per audited decision."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from fleetctl import timefmt
from fleetctl.why import TrailEntry, WhyReport

_OUTCOME_STYLE = {"applied": "green", "planned": "cyan", "skipped": "yellow", "failed": "bold red"}


def _entry(entry: TrailEntry) -> Text:
    block = Text()
    block.append(f"{entry.at:%Y-%m-%d %H:%M:%S}  ", style="bold")
    block.append(f"{entry.actor} ({entry.trigger})  ")
    block.append(entry.outcome + (" (dry run)" if entry.dry_run else ""), style=_OUTCOME_STYLE[entry.outcome])
    block.append(f"\n    {entry.action}")
    block.append(f"\n    why: {entry.reason}")
    for change in entry.changes:
        block.append(f"\n    {change}", style="dim" if entry.outcome != "applied" else "")
    return block


def render(report: WhyReport) -> RenderableType:
    title = Text(
        f"{report.endpoint}: {len(report.entries)} audited decision(s) since {timefmt.utc(report.since)} "
        f"(stack {report.stack})",
        style="bold underline",
    )
    if not report.entries:
        return Group(title, Text("nothing was changed or decided in that time; widen it with --since 7d"))
    return Group(title, *(_entry(e) for e in report.entries))
