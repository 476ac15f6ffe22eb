"""Demo opening: a release week on the capacity simulator, the project's policy beside reactive scaling and an oracle.

Four weeks of traffic from ``fleetsim.scenarios`` (a world of its own: two-humped days, a trend, the Friday simulpub
30 % above its calendar entry and arriving 10 minutes early); the first three are the history the project's
reconciler forecasts from, the last is played through the project's own reconciler, the template's target tracking
and the alarm responder's decisions, and judged. The local system then plays a spike with real containers.
"""

from __future__ import annotations

from pathlib import Path

from devtools.emulator import MotoServer
from fleetsim.prescale import CalendarPrescale
from fleetsim.report import plot, summarize, table, windows
from fleetsim.scenarios import generate, scenario
from fleetsim.simulate import judged, load_setup, run_policies

PLOT = Path(__file__).resolve().parents[1] / ".cache" / "demo" / "release_week.png"
SCENARIO = "event-early-30pct"
SEED = 7


def _forecast_lines(prescale: CalendarPrescale) -> list[str]:
    """What the project's last plan of the week forecast, the event sizes it learned and the rate it divided by."""
    if prescale.last_plan is None or not prescale.last_plan.variants:
        return []
    variant = prescale.last_plan.variants[0]
    lines = []
    if variant.forecast is not None:
        f = variant.forecast
        lines.append(f"the reconciler's forecast: {f.why}; everyday {f.forecast_low_rps}-{f.forecast_peak_rps} "
                     f"requests/s, x{f.weekly_growth}/week (configured: {f.configured_baseline_rps:g})")  # fmt: skip
    for size in variant.event_sizes:
        learned = f"learned x{size.learned:g} from {size.occurrences}" if size.learned is not None else size.why
        lines.append(f"  {size.name:<24} configured x{size.configured:g}, {learned}; used: {size.used}")
    if variant.served_capacity is not None:
        lines.append(f"rate per instance: {variant.served_capacity.why} ({variant.served_capacity.used_rps:g}/s)")
    return lines


def run(emulator: MotoServer) -> None:
    setup = load_setup("manga-chat-prod")
    world = scenario(SCENARIO)
    entries, _ = setup.calendar()
    trace = generate(world, setup.variant, entries, setup.endpoint.name)
    week = judged(trace, world.judged_from)
    variant = setup.variant
    print(f"{setup.endpoint.name}/{variant.name}: {variant.instance_type} at {variant.capacity_rps_per_instance:g} "
          f"requests/s each, floor {variant.floor}, cap {variant.cap}, configured baseline {variant.baseline_rps:g} "
          f"requests/s; instances take 5-8 min plus {setup.params.container_ready_s} s to start")  # fmt: skip
    print(
        f"traffic: {world.description} (fleetsim.scenarios {SCENARIO!r}; three weeks of history, then the judged week)"
    )
    print("\n".join(windows(week)))
    runs = run_policies(trace, setup, seed=SEED, judge_from=world.judged_from)
    price = variant.price_per_instance_hour
    summaries = {name: summarize(r.minutes, week, setup.params, price) for name, r in runs.items()}
    project_policy = runs["project"].policy
    prescale = (
        next((p for p in project_policy.parts if isinstance(p, CalendarPrescale)), None) if project_policy else None
    )
    print()
    print("\n".join(_forecast_lines(prescale) if prescale else []))
    print()
    print(table(summaries))
    project, reactive = summaries["project"], summaries["reactive"]
    print(f"\ncalendar events: project failed {project.failed_pct_on_calendar_events:g} %, reactive "
          f"{reactive.failed_pct_on_calendar_events:g} %; GPU hours vs the oracle: project "
          f"x{project.instance_hours / summaries['oracle'].instance_hours:.2f}, reactive "
          f"x{reactive.instance_hours / summaries['oracle'].instance_hours:.2f}")  # fmt: skip
    minutes = {name: r.minutes for name, r in runs.items()}
    print(f"plot: {plot(minutes, week, PLOT, f'{SCENARIO}: the judged week (seed {SEED})')}")
