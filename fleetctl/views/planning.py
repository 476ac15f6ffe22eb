"""``plan`` for people: where each variant's plan came from, the calendar entries' sizes, the MinCapacity
timeline, what the plan cannot do (over the cap, steps merged), the changes a run would make, what it skips."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from fleetctl import timefmt
from fleetctl.planning import PlannedEventSize, PlannedForecast, PlannedVariant, PlanReport, configured_why
from fleetctl.views.common import section, table


def source_line(forecast: PlannedForecast) -> str:
    """Where a plan came from, in one line.

    Examples
    --------
    >>> source_line(PlannedForecast(source="history", why="", history_days=21, weekly_growth=1.012, level_ratio=1,
    ...     configured_baseline_rps=12, forecast_low_rps=4.6, forecast_peak_rps=13.1))
    'plan from 21.0 days of its own Invocations: everyday 4.6-13.1 req/s, trend x1.01/week'
    >>> line = source_line(PlannedForecast(source="history", why="", history_days=21, weekly_growth=1.0,
    ...     level_ratio=0.62, configured_baseline_rps=12, forecast_low_rps=4.6, forecast_peak_rps=13.1))
    >>> line.split(", ")[-1]
    'today x0.62 (the hours ahead lowered)'
    >>> source_line(PlannedForecast(source="configuration", why="no history reader: configured levels",
    ...     history_days=0, weekly_growth=1, level_ratio=1, configured_baseline_rps=12, forecast_low_rps=None,
    ...     forecast_peak_rps=None))
    'plan from the configured levels (baseline 12 req/s): no history reader'
    >>> line = source_line(PlannedForecast(source="configuration", why="3.0 days of Invocations history, 7 needed: "
    ...     "configured levels", history_days=0, weekly_growth=1, level_ratio=2, configured_baseline_rps=12,
    ...     forecast_low_rps=None, forecast_peak_rps=None))
    >>> line.split(": ", 1)[1]
    '3.0 days of Invocations history, 7 needed, today x2.00 (the events ahead raised)'
    """
    today = ""
    if forecast.level_ratio != 1:
        effect = "the hours ahead lowered" if forecast.level_ratio < 1 else "the events ahead raised"
        today = f", today x{forecast.level_ratio:.2f} ({effect})"
    if forecast.source == "history":
        low, peak = forecast.forecast_low_rps or 0.0, forecast.forecast_peak_rps or 0.0
        return (
            f"plan from {forecast.history_days:.1f} days of its own Invocations: everyday {low:.1f}-{peak:.1f} req/s, "
            f"trend x{forecast.weekly_growth:.2f}/week{today}"
        )
    baseline = f"baseline {forecast.configured_baseline_rps:g} req/s"
    return f"plan from the configured levels ({baseline}): {configured_why(forecast.why)}{today}"


def _used(size: PlannedEventSize) -> str:
    if size.used == "learned":
        return f"learned x{size.learned:g}"
    return f"configured x{size.configured:g}: {size.why}" if size.why else f"configured x{size.configured:g}"


def _sizes(variant: PlannedVariant) -> RenderableType:
    sizes = table("calendar entry", "kind", "configured", "learned", "past occurrences", "early", "plan used")
    for size in variant.event_sizes:
        sizes.add_row(
            size.name,
            size.kind,
            f"x{size.configured:g}",
            f"x{size.learned:g}" if size.learned is not None else "-",
            str(size.occurrences),
            f"{size.early_minutes} min" if size.used == "learned" else "-",
            _used(size),
        )
    return sizes


def _limits(variant: PlannedVariant, report: PlanReport) -> list[RenderableType]:
    """What the plan cannot do: instances slower than configured (a lowered rate), forecast demand above the cap
    (red), steps merged to stay within the quota."""
    lines: list[RenderableType] = []
    rate = variant.served_rate
    if rate is not None and rate.used_rps < rate.configured_rps:
        lines.append(Text(f"rate per instance: {rate.why}", style="bold yellow"))
    for over in variant.over_cap:
        lines.append(
            Text(
                f"over the cap: {timefmt.utc(over.start)} to {over.end:%H:%M} UTC needs up to {over.peak_instances} "
                f"instances, cap {over.cap}: about {over.requests_at_risk} requests at risk (raise the cap in "
                "fleet.yaml and the scalable target's MaxCapacity)",
                style="bold red",
            )
        )
    if variant.merged_steps:
        first = variant.merged_steps[0]
        lines.append(
            Text(
                f"{len(variant.merged_steps)} step(s) merged into their neighbours to stay within "
                f"{report.max_scheduled_actions} scheduled actions (first at {timefmt.utc(first.at)})",
                style="yellow",
            )
        )
    return lines


def _head(variant: PlannedVariant, report: PlanReport) -> list[RenderableType]:
    title = Text(f"{variant.endpoint}/{variant.variant}: MinCapacity {variant.min_capacity_at} at that moment")
    parts: list[RenderableType] = [title]
    if variant.forecast is not None:
        parts.append(Text(source_line(variant.forecast)))
    if variant.event_sizes:
        parts += [_sizes(variant), Text("")]
    return parts + _limits(variant, report)


def _timeline(variant: PlannedVariant, report: PlanReport) -> RenderableType:
    head = _head(variant, report)
    if not variant.timeline:
        return Group(*head, Text("  no change within the planning horizon"), Text(""))
    steps = table("when (UTC)", "local", "in", "MinCapacity", "reason")
    for step in variant.timeline:
        steps.add_row(
            timefmt.utc(step.at),
            timefmt.local(step.at, step.timezone),
            timefmt.ago(step.at, report.at),
            f"→ {step.min_capacity}",
            step.reason,
        )
    return Group(*head, steps, Text(""))


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
