"""The README's capacity tables, generated from ``bench/results/release_day.json`` and ``capacity_sweep.json``
(registered in :data:`devtools.readme_bench.BLOCKS`, checked by the same test)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from devtools.readme_bench import RESULTS, Figure, load

#: The scenarios of ``fleetsim.scenarios`` in the README's order, with the note a reader needs beside the name.
SCENARIOS = (
    ("baseline-0.5x", ""),
    ("baseline-1x", ""),
    ("baseline-2x", " (cap 30)"),
    ("us-pacific-1x", ""),
    ("event-early-30pct", ""),
    ("event-small-30pct", ""),
    ("entry-brings-nothing", ""),
    ("unannounced-3x", " (3 spikes)"),
)


def _pct(value: Figure) -> str:
    return f"{round(value, 2):g} %"


#: The columns both scenario tables share: project against target tracking alone.
_SHARED_HEADER = (
    "| scenario | failed on calendar events, project (reactive) | GPU hours vs oracle, project (reactive) "
    "| minutes degraded, project (reactive) "
)


def _shared_cells(r: dict[str, Figure], prefix: str, name: str) -> str:
    """Scenario ``name``'s shared columns, from the keys ``<prefix><metric>__<name>``."""

    def get(metric: str) -> Figure:
        return r[f"{prefix}{metric}__{name}"]

    return (
        f"| {_pct(get('failed_pct_on_calendar_events_project'))} "
        f"({_pct(get('failed_pct_on_calendar_events_reactive'))}) "
        f"| {get('gpu_hours_project_vs_oracle'):.3f} ({get('gpu_hours_reactive_vs_oracle'):.3f}) "
        f"| {_pct(get('degraded_minutes_pct_project'))} ({_pct(get('degraded_minutes_pct_reactive'))}) "
    )


def scenario_table(results: Path = RESULTS) -> str:
    """Per scenario: failed on calendar events, GPU hours over the oracle's and degraded minutes, project
    (reactive), and the replaced policy's ("before")."""
    r = load("release_day", results)
    lines = [_SHARED_HEADER + "| before: on events / GPU hours |", "|---|---|---|---|---|"]
    for name, note in SCENARIOS:
        lines.append(
            f"| {name}{note} {_shared_cells(r, '', name)}"
            f"| {_pct(r[f'failed_pct_on_calendar_events_before__{name}'])} / "
            f"{r[f'gpu_hours_before_vs_oracle__{name}']:.3f} |"
        )
    spike = "unannounced-3x"
    failed = {who: r[f"failed_in_unannounced_spike_{who}__{spike}"] for who in ("project", "reactive", "before")}
    lines += [
        "",
        f"In the three unannounced 3x spikes the project failed {failed['project']:,.0f} requests and target "
        f"tracking alone {failed['reactive']:,.0f} (before: {failed['before']:,.0f}). The first capacity request came "
        f"{r['spike_to_first_capacity_request_s_project__worst']:.0f} s after the worst spike's start "
        f"(`spike_to_first_capacity_request_s`), "
        f"{r['shortfall_to_first_capacity_request_s_project__worst']:.0f} s after the first minute the fleet fell "
        f"short (`shortfall_to_first_capacity_request_s`). The most scheduled actions kept at once: "
        f"{r['scheduled_actions_max__worst']:.0f}.",
        "",
        _spike_seeds_paragraph(r),
    ]
    return "\n".join([*lines, "", unseen_table(r), "", new_endpoint_table(r)])


def _spike_seeds_paragraph(r: dict[str, Figure]) -> str:
    """The spike scenario over several seeds (``release_day.SPIKE_SEEDS``): the figures not one draw's luck."""
    return (
        f"Played again with {r['spike_seeds']:.0f} other seeds (`spike_seeds_*`), the project failed "
        f"{r['spike_seeds_failed_in_spikes_project_mean']:,.0f} requests in the spikes on average and target "
        f"tracking alone {r['spike_seeds_failed_in_spikes_reactive_mean']:,.0f}; the project failed no more on "
        f"{100 * r['spike_seeds_project_not_above_reactive_share']:.0f} % of the seeds. It went into a spike with "
        f"{r['spike_seeds_serving_before_spike_project_mean']:.2f} instances serving on average (target tracking: "
        f"{r['spike_seeds_serving_before_spike_reactive_mean']:.2f}), for "
        f"{r['spike_seeds_gpu_hours_project_vs_reactive_median']:.3f}x target tracking's GPU hours (median) and "
        f"{r['spike_seeds_degraded_minutes_pct_project_mean']:.2f} % of minutes degraded (target tracking: "
        f"{r['spike_seeds_degraded_minutes_pct_reactive_mean']:.2f} %). "
        f"{100 * r['spike_seeds_slow_first_request_share_project']:.0f} % of the spikes had their first capacity "
        f"request later than 60 s after their start. In each of those the first minute loaded the fleet "
        f"{r['spike_seeds_slow_onset_load_vs_before_min']:.2f}-{r['spike_seeds_slow_onset_load_vs_before_max']:.2f}x "
        f"as much as the busiest of the ten minutes before it (arrivals per serving instance): a rule on load alone "
        f"that asked within all those first minutes would also have fired on "
        f"{r['spike_seeds_ordinary_minutes_as_loaded_per_day']:.0f} ordinary minutes a day."
    )


def _scenario_rows(
    r: dict[str, Figure], prefix: str, intro: str, last_header: str, last_cell: Callable[[str], str]
) -> str:
    """A table of the scenarios whose keys start with ``prefix``: the shared columns, then ``last_cell(name)``."""
    first = f"{prefix}gpu_hours_project_vs_oracle__"
    names = sorted(k.removeprefix(first) for k in r if k.startswith(first) and not k.endswith("__worst"))
    lines = [intro, "", f"{_SHARED_HEADER}| {last_header} |", "|---|---|---|---|---|"]
    lines += [f"| {name} {_shared_cells(r, prefix, name)}| {last_cell(name)} |" for name in names]
    return "\n".join(lines)


def unseen_table(r: dict[str, Figure]) -> str:
    """The same figures on the scenarios with knobs the defaults were not tuned on (``release_day.UNSEEN``)."""

    def spikes(name: str) -> str:
        if f"unseen_failed_in_unannounced_spike_project__{name}" not in r:
            return "—"
        return (
            f"{r[f'unseen_failed_in_unannounced_spike_project__{name}']:,.0f} "
            f"({r[f'unseen_failed_in_unannounced_spike_reactive__{name}']:,.0f})"
        )

    intro = (
        "On the same scenarios with knobs the defaults were not tuned on (other seeds; `noise15`: per-minute noise "
        "0.15 instead of 0.08; `growth12`: +12 %/week; `weekend15`: weekends 1.5x; `night03`: a night at 0.3 of "
        "the humps' floor; `holiday`: the judged Wednesday at 0.55 of its usual traffic and Thursday at 0.7; "
        "`walk12`: a level that wanders hour by hour in every week, log-sigma 0.12 an hour, 0.85 of it kept; "
        "`stepup18`: the whole level, events included, 1.8x from the day before the judged week, cap 30; `level3`: "
        "three times the configured baseline, cap 40; `dst`: the four weeks from 2026-02-23, the US clocks going "
        "forward on 8 March in the history, `traffic_timezone` America/Los_Angeles; `capacity0.7`: instances that "
        "serve 0.7x fleet.yaml's `capacity_rps_per_instance`, as a model with longer answers would, cap 20; "
        "`capacity1.4`: instances that serve 1.4x it, a rate measured too cautiously; `humps3h`: the day's humps 3 "
        "hours later from two days before the judged week, the history before that in the old shape):"
    )
    return _scenario_rows(r, "unseen_", intro, "failed in spikes, project (reactive)", spikes)


def new_endpoint_table(r: dict[str, Figure]) -> str:
    """The judged weeks alone, as a new endpoint's first week (``release_day.NEW_ENDPOINT``)."""

    def before(name: str) -> str:
        return (
            f"{_pct(r[f'new_endpoint_failed_pct_on_calendar_events_before__{name}'])} / "
            f"{r[f'new_endpoint_gpu_hours_before_vs_oracle__{name}']:.3f}"
        )

    intro = (
        "Played as a new endpoint's first week (the judged week alone, with no history before it: the configured "
        "levels, lowered by today's level where the traffic runs below them and the events sized up where it runs "
        "above; before: the configured levels alone):"
    )
    return _scenario_rows(r, "new_endpoint_", intro, "before: on events / GPU hours", before)


def sweep_table(results: Path = RESULTS) -> str:
    """The sweep's settings, each with its worst scenario's figures, and what it chose."""
    r = load("capacity_sweep", results)
    settings = sorted({key.split("__", 1)[1] for key in r if key.startswith("gpu_hours_vs_oracle__")})
    lines = [
        "| setting | GPU hours vs oracle | failed on calendar events | minutes degraded |",
        "|---|---|---|---|",
    ]
    for setting in settings:
        lines.append(
            f"| `{setting}` | {r[f'gpu_hours_vs_oracle__{setting}']:.3f} "
            f"| {_pct(r[f'failed_pct_on_calendar_events__{setting}'])} "
            f"| {_pct(r[f'degraded_minutes_pct__{setting}'])} |"
        )
    lines += [
        "",
        f"Chosen (`chosen_*`): `lead_time_minutes` {r['chosen_lead_time_minutes']:.0f}, `forecast_headroom` "
        f"{r['chosen_headroom']:g}, `InvocationsPerInstanceTarget` {r['chosen_invocations_target']:.0f}, "
        f"`ConcurrentRequestsPerInstanceTarget` {r['chosen_concurrency_target']:.0f}.",
    ]
    return "\n".join(lines)
