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


def simulate(argv: Sequence[str]) -> int:
    """``python -m fleetsim`` with the same arguments (its own --help, output and exit codes)."""
    from fleetsim.__main__ import main as fleetsim_main

    try:
        return fleetsim_main(list(argv))
    except SystemExit as exc:  # fleetsim's argparse: --help (0) or a bad flag (2)
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE
