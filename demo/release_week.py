"""Demo opening: a release week on the capacity simulator, the project's policy beside reactive scaling and an oracle.

The same week as ``make bench BENCH=release_day`` (the shipped calendar plus one unpredicted x2 spike), run
through the project's own reconciler, the template's target tracking and the alarm responder's decisions. The
local system then plays the Friday spike with real containers (the next part).
"""

from __future__ import annotations

from pathlib import Path

from bench.release_day import SEED, SPIKE, release_week
from devtools.emulator import MotoServer
from fleetsim.report import plot, summarize, table, windows
from fleetsim.simulate import load_setup, simulate

PLOT = Path(__file__).resolve().parents[1] / ".cache" / "demo" / "release_week.png"


def run(emulator: MotoServer) -> None:
    setup = load_setup("manga-chat-prod")
    trace = release_week(setup, SEED)
    variant = setup.variant
    print(f"{setup.endpoint.name}/{variant.name}: {variant.instance_type} at {variant.capacity_rps_per_instance:g} "
          f"requests/s each, floor {variant.floor}, cap {variant.cap}, baseline {variant.baseline_rps:g} requests/s; "
          f"instances take 5-8 min to provision plus {setup.params.container_ready_s} s to start")  # fmt: skip
    print("\n".join(windows(trace)))
    runs = simulate(trace, setup, seed=SEED)
    price = variant.price_per_instance_hour
    summaries = {name: summarize(minutes, trace, setup.params, price) for name, minutes in runs.items()}
    print()
    print(table(summaries))
    project, reactive = summaries["project"], summaries["reactive"]
    print(f"\ncalendar events: project failed {project.failed_pct_on_calendar_events:g} %, reactive "
          f"{reactive.failed_pct_on_calendar_events:g} %. The unpredicted spike ({SPIKE.start:%a %H:%M} JST): project "
          f"failed {project.failed_in_unpredicted_spikes:,}, reactive {reactive.failed_in_unpredicted_spikes:,} "
          "requests; no policy adds an instance faster than SageMaker provisions one.")  # fmt: skip
    print(f"plot: {plot(runs, trace, PLOT, 'release week (seed 7)')}")
