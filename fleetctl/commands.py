"""One thin function per command: read the arguments, call one core function, print the answer.

Each returns the exit code; failures are raised as :class:`~fleetctl.errors.CliError` and printed by
:func:`fleetctl.cli.main`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from fleetctl.context import Context
from fleetctl.errors import ExitCode
from fleetctl.output import Output


def status(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import endpoints
    from fleetctl import status as core
    from fleetctl.views import status as view

    ctx = Context(args)
    report = core.collect(ctx.stack, endpoints.choose(ctx.stack, args.endpoint), ctx.now, limit=args.actions)
    out.result(report, lambda: view.render(report))
    return ExitCode.OK


def why(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import endpoints, timefmt
    from fleetctl import why as core
    from fleetctl.views import why as view

    ctx = Context(args)
    since = timefmt.parse_since(args.since, timefmt.zone(args.timezone), ctx.now)
    report = core.collect(ctx.stack, endpoints.choose(ctx.stack, args.endpoint), since, ctx.now, args.actor)
    out.result(report, lambda: view.render(report))
    return ExitCode.OK


def kill_switch(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import killswitch as core
    from fleetctl.views import killswitch as view

    ctx = Context(args)
    if args.action == "status":
        report = core.read(ctx.stack)
    else:
        audited = [e.name for e in ctx.fleet.managed_by(ctx.stack.environment)]
        report = core.set_engaged(ctx.stack, args.action == "engage", ctx.identity(), args.reason, audited)
    out.result(report, lambda: view.render(report))
    return ExitCode.OK


def calendar(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import releases as core
    from fleetctl.views import releases as view

    ctx = Context(args)
    if args.calendar_action == "list":
        listing = core.listing(ctx.stack, ctx.fleet, ctx.now)
        out.result(listing, lambda: view.render_listing(listing))
        return ExitCode.OK
    if args.calendar_action == "remove":
        change = core.remove(ctx.stack, ctx.fleet, args.event_id, ctx.now)
    else:
        change = core.add(
            ctx.stack,
            ctx.fleet,
            args.event_id or core.event_id_for(args.name),
            _calendar_row(args),
            args.replace,
            ctx.now,
        )
    out.result(change, lambda: view.render_change(change))
    return ExitCode.OK


def _calendar_row(args: argparse.Namespace) -> dict[str, object]:
    """The calendar-table row the flags describe (what an operator used to write as DynamoDB JSON)."""
    row: dict[str, object] = {
        "name": args.name,
        "start": args.start,
        "timezone": args.timezone,
        "multiplier": args.multiplier,
        "reason": args.reason,
    }
    if args.duration is not None:
        row["duration_minutes"] = args.duration
    if args.end is not None:
        row["end"] = args.end
    if args.endpoint:
        row["endpoints"] = list(args.endpoint)
    return row


def plan(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import planning as core
    from fleetctl import timefmt
    from fleetctl.views import planning as view

    ctx = Context(args)
    at = timefmt.parse_time(args.at, timefmt.zone(args.timezone), "--at", ctx.now)
    report = core.plan(ctx.stack, ctx.fleet, args.endpoint, at)
    out.result(report, lambda: view.render(report))
    return ExitCode.OK


def simulate(argv: Sequence[str]) -> int:
    """``python -m fleetsim`` with the same arguments (its own --help, output and exit codes)."""
    from fleetsim.__main__ import main as fleetsim_main

    try:
        return fleetsim_main(list(argv))
    except SystemExit as exc:  # fleetsim's argparse: --help (0) or a bad flag (2)
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE
