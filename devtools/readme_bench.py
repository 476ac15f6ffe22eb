"""README tables generated from ``bench/results/*.json``, so the figures the README quotes are the measured ones.

A generated block sits between two markers in ``README.md``::

    <!-- bench-table:begin -->
    ...generated, never edited by hand...
    <!-- bench-table:end -->

Each block name maps to a renderer in :data:`BLOCKS` (a function of the results folder that returns the block's
Markdown); to generate another README table, add its renderer there and its markers in the README.
``make readme-bench`` rewrites every block; ``tests/unit/test_readme_bench.py`` fails while the README and the
results files differ (``python -m devtools.readme_bench --check`` says the same from the command line).

A row quotes a results file through a :meth:`str.format` template over its keys: ``{key}`` writes the value as
the benchmark rounded it (an integral value without ``.0``), ``{key:,.0f}`` and the like format it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools import deploy_costs

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
RESULTS = REPO / "bench" / "results"


class ReadmeBenchError(ValueError):
    """A block whose markers are missing or repeated, or a row that quotes a figure no results file has."""


class Figure(float):
    """A measured value: ``format(Figure(3.0), "")`` is ``3``, ``format(Figure(1.585), "")`` is ``1.585``.

    Examples
    --------
    >>> "{a} {b} {c:,.0f}".format(a=Figure(3.0), b=Figure(1.585), c=Figure(21279.0))
    '3 1.585 21,279'
    """

    def __format__(self, spec: str) -> str:
        if spec:
            return format(float(self), spec)
        return str(int(self)) if self.is_integer() else repr(float(self))


def load(name: str, results: Path = RESULTS) -> dict[str, Figure]:
    """``bench/results/<name>.json`` as figures.

    Raises
    ------
    ReadmeBenchError
        When the benchmark has no results file.
    """
    path = results / f"{name}.json"
    if not path.is_file():
        raise ReadmeBenchError(f"{path} is missing: run `make bench BENCH={name}` and commit it")
    return {key: Figure(value) for key, value in json.loads(path.read_text()).items()}


@dataclass(frozen=True)
class Row:
    """One benchmark's row: its headline figures (a template over its results' keys) and its target."""

    bench: str
    headline: str
    target: str
    #: Figures computed from the results (a best case over scenarios, a key's parts), for the template.
    derived: Callable[[Mapping[str, Figure]], Mapping[str, Any]] = field(default=lambda figures: {})

    def render(self, results: Path = RESULTS) -> str:
        figures = load(self.bench, results)
        try:
            headline = self.headline.format_map({**figures, **self.derived(figures)})
        except KeyError as exc:
            raise ReadmeBenchError(
                f"bench/results/{self.bench}.json has no {exc.args[0]!r} (quoted in README)"
            ) from None
        return f"| `{self.bench}` | {headline} | {self.target} |"


def _best_handler_import(figures: Mapping[str, Figure]) -> dict[str, Figure]:
    ratios = [v for k, v in figures.items() if k.startswith("handler_import_ratio__") and not k.endswith("__worst")]
    return {"best_handler_import_ratio": Figure(min(ratios))}


def _best_project_gpu_hours(figures: Mapping[str, Figure]) -> dict[str, Figure]:
    prefix = "gpu_hours_project_vs_oracle__"
    scenarios = [v for k, v in figures.items() if k.startswith(prefix) and k != f"{prefix}worst"]
    return {"best_project_gpu_hours": Figure(min(scenarios))}


def _sweep_extremes(figures: Mapping[str, Figure]) -> dict[str, Any]:
    """The sweep's worst calendar-event failure rate and its GPU-hour range, with the setting at each end."""
    hours = {k.split("__", 1)[1]: v for k, v in figures.items() if k.startswith("gpu_hours_vs_oracle__")}
    events = [v for k, v in figures.items() if k.startswith("failed_pct_on_calendar_events__")]
    low, high = min(hours, key=hours.__getitem__), max(hours, key=hours.__getitem__)
    return {
        "worst_event_failed_pct": Figure(max(events)),
        "settings": len(hours),
        "lowest_gpu_hours": hours[low],
        "lowest_setting": low,
        "highest_gpu_hours": hours[high],
        "highest_setting": high,
    }


def _canary_over_slo(figures: Mapping[str, Figure]) -> dict[str, Figure]:
    # A scenario name with a dot ("errors_0.75pct_both") reads as an attribute in a format field.
    return {"reaching_100_both_075": figures["pct_reaching_100__errors_0.75pct_both"]}


#: The Benchmarks table, in the README's order.
BENCH_ROWS = (
    Row(
        "handler_import",
        "every function of `template.yaml` imported as deployed (Python 3.13, the layer's locked packages, the "
        "bytecode `make build` ships) vs a bare Powertools handler's {bare_powertools_import_ms:.0f} ms: "
        "`handler_import_ratio__worst` {handler_import_ratio__worst} (best {best_handler_import_ratio}; median of "
        "{samples} back-to-back pairs of fresh interpreters each); from sources alone (plain `sam build`), the alarm "
        "responder {handler_import_ms_from_source__AlarmResponderFunction:.0f} ms, the bare handler "
        "{bare_powertools_import_ms_from_source:.0f} ms",
        "≤ 1.3 each",
        _best_handler_import,
    ),
    Row(
        "alarm_to_action",
        "`alarm_to_action_p50_ms` {alarm_to_action_p50_ms} (p90 {alarm_to_action_p90_ms}, first event "
        "{alarm_to_action_first_ms}; {alarm_to_action_samples} events; the responder's cold import: "
        "`handler_import`)",
        "—",
    ),
    Row(
        "gateway_overhead",
        "against a fast stand-in upstream (no model; {standin_stream_ms} ms streams), ~200 concurrent streams "
        "(open loop, {arrival_rps_200} arrivals/s; host load {host_load_1m} on 2 shared cores): "
        "`gateway_added_p50_ms_200` {gateway_added_p50_ms_200} / `gateway_added_p99_ms_200` "
        "{gateway_added_p99_ms_200}, `gateway_cpu_ms_per_request_standin_200` "
        "{gateway_cpu_ms_per_request_standin_200} (a bare byte-relaying proxy on the same server stack, side by side: "
        "`bare_proxy_added_p50_ms_200` {bare_proxy_added_p50_ms_200}, `bare_proxy_cpu_ms_per_request_200` "
        "{bare_proxy_cpu_ms_per_request_200}); against the CPU engine (the engine is the bottleneck): "
        "`gateway_throughput_ratio_16` / `_64` {gateway_throughput_ratio_16} / {gateway_throughput_ratio_64} "
        "(medians of {rounds} paired rounds), `gateway_cpu_ms_per_request_64` {gateway_cpu_ms_per_request_64}, "
        "`gateway_added_p50_ms` {gateway_added_p50_ms} (one request at a time), `gateway_rss_mb` {gateway_rss_mb}",
        "p99 ≤ 3; ≥ 0.97, ≤ 2, ≤ 250",
    ),
    Row(
        "prefix_cache",
        "`prefix_cache_hit_rate` {prefix_cache_hit_rate} (summary off), `summarized_prefix_cache_hit_rate` "
        "{summarized_prefix_cache_hit_rate} (as shipped), `naive_prefix_cache_hit_rate` {naive_prefix_cache_hit_rate}",
        "≥ 0.80",
    ),
    Row(
        "long_sessions",
        "`engine_deaths` {engine_deaths}, `over_budget_requests` {over_budget_requests} of {requests} requests "
        "({preemptions} preemptions; unbudgeted, the engine refused {unbudgeted_rejected_requests})",
        "0, 0",
    ),
    Row(
        "release_day",
        "eight scenarios of `fleetsim.scenarios`, each judged on its last week after three of history (table in "
        "Operate: capacity planning): `failed_pct_on_calendar_events_project__worst` "
        "{failed_pct_on_calendar_events_project__worst} "
        "(reactive {failed_pct_on_calendar_events_reactive__worst:.2f}), "
        "`gpu_hours_project_vs_oracle__worst` {gpu_hours_project_vs_oracle__worst} (reactive "
        "{gpu_hours_reactive_vs_oracle__worst}; best {best_project_gpu_hours}), `failed_in_unannounced_spike` "
        "project {failed_in_unannounced_spike_project__worst:,.0f} / reactive "
        "{failed_in_unannounced_spike_reactive__worst:,.0f}, "
        "`spike_to_first_capacity_request_s_project__worst` {spike_to_first_capacity_request_s_project__worst} "
        "({shortfall_to_first_capacity_request_s_project__worst} from the first minute short); over "
        "{spike_seeds:.0f} seeds (`spike_seeds_*`) failed in the spikes project "
        "{spike_seeds_failed_in_spikes_project_mean:,.0f} / reactive {spike_seeds_failed_in_spikes_reactive_mean:,.0f} "
        "on average, project no more on {spike_seeds_project_not_above_reactive_share} of them, first request later "
        "than 60 s for {spike_seeds_slow_first_request_share_project} of the spikes; "
        "`degraded_minutes_pct_project__worst` {degraded_minutes_pct_project__worst} % (reactive "
        "{degraded_minutes_pct_reactive__worst} %), "
        "`scheduled_actions_max__worst` {scheduled_actions_max__worst}; before (`*_before`): "
        "{failed_pct_on_calendar_events_before__worst:.2f} % on events, GPU hours up to "
        "{gpu_hours_before_vs_oracle__worst}x, {failed_in_unannounced_spike_before__worst:,.0f} failed in the spikes; "
        "a canary rollout (default steps) started an hour before Friday's release (`*__rollout-friday`): "
        "{failed_pct_on_calendar_events_project__rollout-friday} % failed on events, `canary_overloaded_minutes` "
        "{canary_overloaded_minutes__rollout-friday}, +{gpu_hours_added_by_rollout_pct__rollout-friday} % GPU hours; "
        "`simulated_days_per_s` "
        "{simulated_days_per_s} (plot: `bench/results/release_day.png`)",
        "0, ≤ 1.15, project ≤ reactive, ≤ 60, ≤ 150; rollout: 0, 0",
        _best_project_gpu_hours,
    ),
    Row(
        "served_rate",
        "the served rate's premise on the real CPU vLLM engine (`--max-num-seqs 4`, 32-token answers, open-loop "
        "arrivals from 0.4x to 1.4x its rate; {window_s:g} s windows stand in for minutes): the engine served "
        "`engine_max_rps` {engine_max_rps}/s past its rate; `served_capacity` read {served_rate_rps}/s from "
        "{saturated_windows:.0f} of {windows:.0f} windows (`served_rate_vs_max` {served_rate_vs_max}; arrivals alone "
        "would read {arrivals_vs_max}x), {saturated_windows_at_light_load:.0f} windows read as saturated at light load",
        "0.9-1.1; 0",
    ),
    Row(
        "capacity_sweep",
        "{settings} settings, one knob at a time, on every scenario (table in Operate): at worst "
        "{worst_event_failed_pct} % failed on calendar events; the worst GPU-hour ratio from {lowest_gpu_hours} "
        "(`{lowest_setting}`) to {highest_gpu_hours} (`{highest_setting}`); chosen (`chosen_*`): lead "
        "{chosen_lead_time_minutes} min, headroom {chosen_headroom:.1f}, targets {chosen_invocations_target} "
        "invocations / {chosen_concurrency_target} concurrent",
        "0",
        _sweep_extremes,
    ),
    Row(
        "closed_loop",
        "alarm periods and the gateways' metrics interval both run x{time_scale} (a 60 s period in "
        "{alarm_period_wall_s} s, metrics every {metrics_interval_wall_s} s); wall-clock / AWS-equivalent: "
        "`alarm_to_capacity_wall_s` {alarm_to_capacity_wall_s} / `_aws_equiv_s` {alarm_to_capacity_aws_equiv_s} "
        "(burst starts -> MinCapacity +{min_capacity_raised_by}), `canary_detect_to_weight0_wall_s` "
        "{canary_detect_to_weight0_wall_s} / `_aws_equiv_s` {canary_detect_to_weight0_aws_equiv_s}; "
        "`controlled_answer_ratio` {controlled_answer_ratio} of {answers_during_broken_canary} answers (one run "
        "each: a run starts four CPU engines)",
        "ratio 1.0",
    ),
    Row(
        "promotion",
        "`gate_seconds` {gate_seconds} (artifact gate {artifact_gate_seconds} + candidate gate "
        "{candidate_gate_seconds}: 10-request load test and the 12-prompt suite on the candidate and the primary, "
        "the tiny CPU model), `user_requests_to_bad_candidate` {user_requests_to_bad_candidate} "
        "({user_answers_during_bad_rollouts} user answers during the two bad rollouts; the bad candidate's gateway "
        "counted the gate's {gate_requests_to_bad_candidate} requests), `good_candidate_promoted` "
        "{good_candidate_promoted}; shadowed candidate: {shadow_requests_replayed} live requests replayed, "
        "similarity to the users' answers {shadow_similarity} against the primary's own {shadow_primary_similarity} "
        "(sampled decoding is the ceiling), p95 {shadow_candidate_p95_ms:.0f} vs {shadow_primary_p95_ms:.0f} ms "
        "(one run: a run starts four CPU engines)",
        "0",
    ),
    Row(
        "canary_judge",
        "replayed traffic through the real analysis at the shipped steps and {bake_minutes} min bake ({baseline_rps} "
        "rps, table in Operate: canary rollout): `aa_false_rollback_rate` {aa_false_rollback_rate} of {aa_rollouts} "
        "A/A rollouts; `minutes_to_detect_ttft_p95_plus10pct_at_5pct_weight` "
        "{minutes_to_detect_ttft_p95_plus10pct_at_5pct_weight}; errors 0.2 -> 0.3 % "
        "(`minutes_to_detect_errors_plus50pct_at_5pct_weight` {minutes_to_detect_errors_plus50pct_at_5pct_weight}: "
        "too few errors to see: one analysis at 5 % fails it with chance {errors_plus50pct_detect_chance_at_5pct_bake}"
        ", half the time takes {errors_plus50pct_minutes_for_half_at_5pct_weight} min at 5 %); a canary at 1 % "
        "errors (twice the SLO): `pct_reaching_100__errors_1pct` "
        "{pct_reaching_100__errors_1pct} % (rolled back at the 5 % step: {rolled_back_at_step_rate__errors_1pct__w5}), "
        "with the primary as bad {pct_reaching_100__errors_1pct_both} %, both at 0.75 % {reaching_100_both_075} %",
        "A/A ≤ 0.01; TTFT +10 % ≤ 15 min; 0 % over the SLO reach 100 %",
        _canary_over_slo,
    ),
    Row(
        "cli",
        "`status_seconds` {status_seconds} (a fresh `fleetctl status` process on the emulator, median of "
        "{status_samples}; first {status_seconds_first}), `cli_import_ms` {cli_import_ms} (importing `fleetctl.cli` "
        "over a bare `python -c pass`, {cli_process_ms:.0f} vs {bare_python_ms:.0f} ms)",
        "< 2 s",
    ),
)


def bench_table(results: Path = RESULTS) -> str:
    """The README's Benchmarks table."""
    lines = ["| benchmark | headline numbers | target |", "|---|---|---|"]
    return "\n".join([*lines, *(row.render(results) for row in BENCH_ROWS)])


#: Every generated README block: its marker name and its renderer.
def _capacity_scenarios(results: Path) -> str:
    from devtools.readme_capacity import scenario_table  # it builds on this module's loader

    return scenario_table(results)


def _capacity_sweep(results: Path) -> str:
    from devtools.readme_capacity import sweep_table

    return sweep_table(results)


def _canary_judge(results: Path) -> str:
    from devtools.readme_canary import canary_table

    return canary_table(results)


BLOCKS: dict[str, Callable[[Path], str]] = {
    "bench-table": bench_table,
    "capacity-scenarios": _capacity_scenarios,
    "capacity-sweep": _capacity_sweep,
    "canary-judge": _canary_judge,
    "deploy-costs": deploy_costs.render,
}


def rewrite(text: str, results: Path = RESULTS, blocks: Mapping[str, Callable[[Path], str]] = BLOCKS) -> str:
    """``text`` with every block of ``blocks`` regenerated between its markers.

    Raises
    ------
    ReadmeBenchError
        When a block's markers are not there exactly once each, in order.

    Examples
    --------
    >>> rewrite("a\\n<!-- t:begin -->\\nold\\n<!-- t:end -->\\nb", Path(), {"t": lambda _: "new"})
    'a\\n<!-- t:begin -->\\nnew\\n<!-- t:end -->\\nb'
    """
    for name, render in blocks.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
            raise ReadmeBenchError(f"README: expected one {begin} followed by one {end}")
        head, rest = text.split(begin)
        _, tail = rest.split(end)
        text = f"{head}{begin}\n{render(results)}\n{end}{tail}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the README's tables from bench/results.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when the README is stale")
    args = parser.parse_args(argv)
    text = README.read_text()
    fresh = rewrite(text)
    if fresh == text:
        return 0
    if args.check:
        print("README.md differs from bench/results: run `make readme-bench`", file=sys.stderr)
        return 1
    README.write_text(fresh)
    print(f"README.md: regenerated {', '.join(BLOCKS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
