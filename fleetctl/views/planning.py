"""``plan`` for people: each variant's MinCapacity timeline, the changes a run would make, what it skips."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from fleetctl import timefmt
from fleetctl.planning import PlannedVariant, PlanReport
from fleetctl.views.common import section, table


def _timeline(variant: PlannedVariant, report: PlanReport) -> RenderableType:
    title = Text(f"{variant.endpoint}/{variant.variant}: MinCapacity {variant.min_capacity_at} at that moment")
    if not variant.timeline:
        return Group(title, Text("  no change within the planning horizon"), Text(""))
    steps = table("when (UTC)", "local", "in", "MinCapacity", "reason")
    for step in variant.timeline:
        steps.add_row(
            timefmt.utc(step.at),
            timefmt.local(step.at, step.timezone),
            timefmt.ago(step.at, report.at),
            f"→ {step.min_capacity}",
            step.reason,
        )
    return Group(title, steps, Text(""))


def render(report: PlanReport) -> RenderableType:
    held = []
    if report.kill_switch_engaged:
        held.append("the kill switch is engaged: a run now would only plan")
    if report.dry_run:
        held.append("the stack runs with DryRun=true: a run would only plan")
    head = Text(
        f"pre-scale plan at {timefmt.utc(report.at)} (stack {report.stack}, fleet.yaml {report.config_version}); "
        "a dry run: nothing was changed or audited",
        style="bold",
    )
    parts: list[RenderableType] = [head, *(Text(h, style="yellow") for h in held), Text("")]
    parts += [_timeline(v, report) for v in report.variants]
    if report.changes:
        changes = table("change", "variant: scheduled action", "reason", "before → after")
        for change in report.changes:
            # Pre-scale actions are named prescale-<endpoint>-<variant>-<UTC time>: the time says which.
            short = change.name.removeprefix(f"prescale-{change.endpoint}-{change.variant}-")
            changes.add_row(change.kind, f"{change.variant}: {short}", change.reason, "\n".join(change.changes))
        parts.append(section("a reconciler run at that moment would", changes))
    else:
        parts.append(section("a reconciler run at that moment would", Text("change nothing")))
    if report.invalid_entries:
        skipped = table("source", "entry", "why it is skipped")
        for bad in report.invalid_entries:
            skipped.add_row(bad.source, bad.name, "\n".join(bad.errors))
        parts.append(section("invalid calendar entries (skipped)", skipped))
    parts += [Text(p, style="bold red") for p in report.problems]
    return Group(*parts)
