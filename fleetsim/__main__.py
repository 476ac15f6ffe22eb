"""``python -m fleetsim``: will the fleet cope with a release, and what will it cost? (README, Operate.)

Examples::

    python -m fleetsim --from 2026-11-30 --days 7 --spike 2026-12-02T13:00,90,2
    python -m fleetsim --from 2026-12-04 --days 1 --calendar one-piece-1100.yaml --plot friday.png
    python -m fleetsim --trace invocations.csv --json
    python -m fleetsim --scenario event-early-30pct --plot judged.png --save-trace event-early.csv
    python -m fleetsim --list-scenarios
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from fleetops.calendar import CalendarEntry
from fleetops.config import FleetConfigError, VariantConfig
from fleetsim import report, scenarios
from fleetsim.simulate import FLEET, POLICIES, Setup, SetupError, judged, load_setup, simulate
from fleetsim.stack import TEMPLATE, StackError
from fleetsim.traffic import Spike, Trace, TraceError, calendar_windows, generate, load_csv, write_csv

DEFAULT_ENDPOINT = "manga-chat-prod"


class UsageError(ValueError):
    """A flag's value cannot be used; the message says which and what to write instead."""


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--timezone: unknown time zone {name!r} (use an IANA name such as Asia/Tokyo)") from None


def _when(text: str, zone: ZoneInfo, flag: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{flag}: cannot read {text!r} (use 2026-12-04 or 2026-12-04T20:00)") from None
    return value.replace(tzinfo=zone) if value.tzinfo is None else value


def _spike(text: str, zone: ZoneInfo) -> Spike:
    parts = text.split(",")
    if len(parts) != 3:
        raise UsageError(f"--spike {text!r}: expected START,MINUTES,MULTIPLIER, e.g. 2026-12-02T13:00,90,2")
    try:
        minutes, multiplier = int(parts[1]), float(parts[2])
    except ValueError:
        raise UsageError(f"--spike {text!r}: MINUTES must be whole and MULTIPLIER a number") from None
    if minutes <= 0 or multiplier <= 0:
        raise UsageError(f"--spike {text!r}: MINUTES and MULTIPLIER must be positive")
    return Spike(_when(parts[0], zone, "--spike"), minutes, multiplier)


def _minutes_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    try:
        values = (float(low), float(high or low))
    except ValueError:
        raise UsageError(f"--provisioning-minutes {text!r}: expected LOW-HIGH, e.g. 5-8") from None
    if not 0 <= values[0] <= values[1]:
        raise UsageError(f"--provisioning-minutes {text!r}: expected 0 <= LOW <= HIGH")
    return round(values[0] * 60), round(values[1] * 60)


def _extra_calendar(path: Path | None) -> list[dict[str, Any]]:
    if path is None:
        return []
    try:
        rows = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"--calendar: cannot read {path}: {exc}") from exc
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"--calendar: {path} must be a YAML list of calendar entries, any kind (README, Operate)")
    return rows


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m fleetsim",
        description="Simulate the fleet's scaling policies (reactive, the project's, an oracle) against traffic.",
    )
    parser.add_argument("--endpoint", default=DEFAULT_ENDPOINT, help="endpoint in the fleet file (primary variant)")
    parser.add_argument("--fleet", type=Path, default=FLEET, help="fleet file (default: the shipped fleet.yaml)")
    parser.add_argument(
        "--template",
        type=Path,
        default=TEMPLATE,
        help="the stack's template.yaml, for its target tracking and reconciler schedule (default: this checkout's)",
    )
    parser.add_argument(
        "--calendar",
        type=Path,
        help="YAML list of extra calendar entries (one_off, yearly, ...; a row without kind is one_off)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from", dest="start", help="first day (or time) to generate traffic for, e.g. 2026-11-30")
    source.add_argument("--trace", type=Path, help="CSV of time,requests per minute (CloudWatch Invocations, Sum)")
    source.add_argument(
        "--scenario",
        help="weeks of traffic from fleetsim.scenarios (not from the calendar's own sizes); its last week is judged",
    )
    source.add_argument("--list-scenarios", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--days", type=float, default=7.0, help="days of generated traffic (default 7)")
    parser.add_argument("--timezone", default="Asia/Tokyo", help="zone of --from and --spike times without offset")
    parser.add_argument("--spike", action="append", default=[], help="unpredicted spike START,MINUTES,MULTIPLIER")
    parser.add_argument(
        "--seed", type=int, default=7, help="traffic noise (not a --scenario's: it has its own) and instance delays"
    )
    parser.add_argument("--provisioning-minutes", default="5-8", help="instance launch delay range (default 5-8)")
    parser.add_argument("--ready-seconds", type=int, default=None, help="container start to healthy (default 75)")
    parser.add_argument("--policies", default=",".join(POLICIES), help=f"comma-separated subset of {POLICIES}")
    parser.add_argument("--plot", type=Path, help="write a PNG: traffic, needed capacity, each policy's capacity")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--save-trace", type=Path, help="also write the traffic played as a CSV --trace replays")
    parser.add_argument(
        "--judge-from",
        help="with --trace: run the policies from this day (or time) on; the weeks before it are the history the "
        "reconciler forecasts from (default: play the whole trace; the reconciler reads what has been played so far, "
        "as a new endpoint's would)",
    )
    args = parser.parse_args(list(argv))
    if not (args.start or args.trace or args.scenario or args.list_scenarios):
        parser.error("one of the arguments --from --trace --scenario is required")
    return args


def _scenario(args: argparse.Namespace, zone: ZoneInfo) -> scenarios.Scenario:
    try:
        chosen = scenarios.scenario(args.scenario)
        if not args.spike:
            return chosen
        return replace(chosen, spikes=(*chosen.spikes, *(_spike(s, zone) for s in args.spike)))
    except KeyError as exc:
        raise UsageError(f"--scenario: {exc.args[0]}") from None
    except ValueError as exc:
        raise UsageError(f"--spike: {exc}") from None


def _list_scenarios() -> str:
    width = max(len(s.name) for s in scenarios.SCENARIOS)
    return "\n".join(f"{s.name:<{width}}  {s.description}" for s in scenarios.SCENARIOS)


def _trace(
    args: argparse.Namespace, entries: Sequence[CalendarEntry], endpoint: str, variant: VariantConfig, zone: ZoneInfo
) -> Trace:
    if args.scenario is not None:
        return scenarios.generate(_scenario(args, zone), variant, entries, endpoint)
    if args.trace is not None:
        trace = load_csv(args.trace)
        return trace.with_windows(calendar_windows(entries, endpoint, trace.start, trace.end))
    if not 0 < args.days <= 366:
        raise UsageError(f"--days {args.days:g}: give between a minute and a year")
    start = _when(args.start, zone, "--from")
    spikes = [_spike(s, zone) for s in args.spike]
    return generate(variant, entries, endpoint, start, start + timedelta(days=args.days), seed=args.seed, spikes=spikes)


def _judge_from(args: argparse.Namespace, trace: Trace, zone: ZoneInfo) -> datetime | None:
    if args.scenario:
        return scenarios.scenario(args.scenario).judged_from
    if args.judge_from is None:
        return None
    if args.trace is None:
        raise UsageError("--judge-from: only with --trace (a scenario knows its judged week)")
    since = _when(args.judge_from, zone, "--judge-from")
    if not trace.start < since < trace.end:
        raise UsageError(
            f"--judge-from {args.judge_from}: not inside the trace ({trace.start:%Y-%m-%d} to {trace.end:%Y-%m-%d})"
        )
    return since


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.list_scenarios:
        print(_list_scenarios())
        return 0
    try:
        zone = _zone(args.timezone)
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        unknown = sorted(set(policies) - set(POLICIES))
        if unknown or not policies:
            raise UsageError(f"--policies: unknown {unknown}; choose from {list(POLICIES)}")
        if not args.template.is_file():
            raise UsageError(
                f"no template at {args.template} (an installed fleetctl has no checkout): pass --template with the "
                "path of the stack's template.yaml, as deployed"
            )
        setup = load_setup(
            args.endpoint,
            fleet=args.fleet,
            template=args.template,
            one_off_rows=_extra_calendar(args.calendar),
            provisioning_s=_minutes_range(args.provisioning_minutes),
            container_ready_s=args.ready_seconds,
        )
        if args.scenario:
            setup = scenarios.setup_for(_scenario(args, zone), setup)
        entries, _ = setup.calendar()
        trace = _trace(args, entries, setup.endpoint.name, setup.variant, zone)
        judge_from = _judge_from(args, trace, zone)
        if args.save_trace:
            write_csv(trace, args.save_trace)
    except (UsageError, SetupError, TraceError, FleetConfigError, StackError, OSError) as exc:
        print(f"fleetsim: {exc}", file=sys.stderr)
        return 2
    progress = None if args.json else (lambda line: print(line, file=sys.stderr, flush=True))
    runs = simulate(trace, setup, seed=args.seed, policies=policies, progress=progress, judge_from=judge_from)
    price = setup.variant.price_per_instance_hour
    summaries = {name: report.summarize(minutes, trace, setup.params, price) for name, minutes in runs.items()}
    title = (
        f"{setup.endpoint.name}/{setup.variant.name}: {trace.start:%Y-%m-%d %H:%M} UTC, "
        f"{len(trace) / 1440:.1f} days, seed {args.seed}"
    )
    if args.scenario:
        title = f"{title}; scenario {args.scenario}, judged from {judge_from:%Y-%m-%d %H:%M} UTC"
    plot = report.plot(runs, judged(trace, judge_from), args.plot, title) if args.plot else None
    if args.json:
        print(json.dumps(_as_json(setup, trace, summaries, plot, judge_from), indent=2))
        return 0
    print(title)
    print(
        f"{setup.variant.instance_type}, {setup.variant.capacity_rps_per_instance:g} requests/s per instance, "
        f"floor {setup.variant.floor}, cap {setup.variant.cap}, ${price or 0:.2f}/instance-hour"
    )
    print("\n".join(report.windows(trace)))
    print()
    print(report.table(summaries))
    if plot:
        print(f"\nplot: {plot}")
    return 0


def _as_json(
    setup: Setup,
    trace: Trace,
    summaries: dict[str, report.Summary],
    plot: Path | None,
    judged_from: datetime | None,
) -> dict[str, Any]:
    return {
        "endpoint": setup.endpoint.name,
        "variant": setup.variant.name,
        "start": trace.start.isoformat(),
        "minutes": len(trace),
        "judged_from": judged_from.isoformat() if judged_from else None,
        "windows": [
            {"name": w.name, "start": w.start.isoformat(), "end": w.end.isoformat(), "predicted": w.predicted}
            for w in trace.windows
        ],
        "policies": {name: s.as_dict() for name, s in summaries.items()},
        "plot": str(plot) if plot else None,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
