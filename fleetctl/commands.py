"""One thin function per command: read the arguments, call one core function, print the answer.

Each returns the exit code; failures are raised as :class:`~fleetctl.errors.CliError` and printed by
:func:`fleetctl.cli.main`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetctl.context import Context
from fleetctl.errors import CliError, ExitCode
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
        if args.file and any(getattr(args, flag) is not None for flag in (*_ONE_OFF_FLAGS, "duration", "end")):
            raise CliError(ExitCode.USAGE, "--file holds the whole entry", "drop --name/--start/... or the file")
        row = _calendar_file(args.file) if args.file else _calendar_row(args)
        event_id = args.event_id or core.event_id_for(str(row.get("name") or row.get("event_id") or ""))
        change = core.add(ctx.stack, ctx.fleet, event_id, row, args.replace, ctx.now)
    out.result(change, lambda: view.render_change(change))
    return ExitCode.OK


_ONE_OFF_FLAGS = ("name", "start", "timezone", "multiplier")


def _calendar_file(path: str) -> dict[str, Any]:
    """One entry of any kind from a YAML or JSON file (``-``: stdin); the reconciler validates it next."""
    import sys

    import yaml

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        row = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(
            ExitCode.USAGE, f"--file: cannot read {path}: {exc}", "give a readable YAML or JSON file"
        ) from exc
    if not isinstance(row, dict):
        raise CliError(
            ExitCode.USAGE,
            f"--file: {path} must hold one calendar entry (a mapping), got {type(row).__name__}",
            "see the README's release calendar for each kind's fields",
        )
    return row


def _calendar_row(args: argparse.Namespace) -> dict[str, object]:
    """The calendar-table row the flags describe (what an operator used to write as DynamoDB JSON)."""
    missing = [f"--{flag}" for flag in _ONE_OFF_FLAGS if getattr(args, flag) is None]
    if args.duration is None and args.end is None:
        missing.append("--duration or --end")
    if missing:
        raise CliError(
            ExitCode.USAGE,
            f"calendar add: a one-off release needs {', '.join(missing)}",
            "give them, or --file with an entry of any kind",
        )
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


def rollout(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import rollouts as core
    from fleetctl.views import rollouts as view

    ctx = Context(args)
    action = args.rollout_action
    if action == "status":
        if args.rollout_id:
            detail = core.detail(ctx.stack, args.rollout_id)
            out.result(detail, lambda: view.render_detail(detail))
        else:
            listing = core.listing(ctx.stack)
            out.result(listing, lambda: view.render_list(listing))
        return ExitCode.OK
    if action in ("approve", "reject"):
        note = getattr(args, "reason", "") or ""
        decision = core.decide(ctx.stack, args.rollout_id, action == "approve", note)
        out.result(decision, lambda: view.render_decision(decision))
        return ExitCode.OK
    if action == "start":
        started = core.start(ctx.stack, _request_file(args.file))
        if args.wait:
            started = _follow_rollout(ctx, out, started.rollout_id, args.timeout)
        out.result(started, lambda: view.progress_lines(started))
        return _rollout_exit(started.status)
    arn, request = core.abort(ctx.stack, args.rollout_id, args.reason, ctx.identity(), _wall_clock())
    return _rollback_result(out, arn, request, args, aborted=args.rollout_id)


def rollback(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import endpoints
    from fleetctl import rollouts as core

    ctx = Context(args)
    endpoint = endpoints.choose(ctx.stack, args.endpoint)
    # No target: the rollback derives it (the rollout's lease row, else the model pointer's previous config).
    arn, request = core.rollback(ctx.stack, endpoint, args.reason, ctx.identity(), _wall_clock())
    return _rollback_result(out, arn, request, args, aborted=None)


def _wall_clock() -> datetime:
    from datetime import UTC

    return datetime.now(UTC)


def _request_file(path: str) -> dict[str, Any]:
    import json
    import sys

    from fleetctl.errors import CliError

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise CliError(ExitCode.USAGE, f"cannot read {path}: {exc.strerror}", "give the request file's path") from None
    except ValueError as exc:
        raise CliError(ExitCode.USAGE, f"{path} is not JSON: {exc}", "the request is one JSON object") from None
    request = data.get("request", data) if isinstance(data, dict) else data  # events/rollout_validate.json works too
    if not isinstance(request, dict):
        raise CliError(ExitCode.USAGE, f"{path} holds {type(request).__name__}, not a JSON object", "see README")
    return request


def _rollout_exit(status: str) -> int:
    return ExitCode.OK if status in ("RUNNING", "SUCCEEDED") else ExitCode.WORKFLOW_FAILED


def _follow_rollout(ctx: Context, out: Output, rollout_id: str, timeout_s: float) -> Any:
    """Follow a rollout until it ends or waits for a person."""
    from fleetctl import rollouts as core
    from fleetctl.rollout_progress import find
    from fleetctl.stack import ROLLOUT_STATE_MACHINE

    machine = ctx.stack.output(ROLLOUT_STATE_MACHINE)
    with out.progress(f"rollout {rollout_id}: starting") as update:
        return core.follow(
            lambda: find(machine, rollout_id),
            lambda p: (
                f"rollout {rollout_id}: {p.state} (canary at {p.step_weight if p.step_weight is not None else 0}%)"
            ),
            lambda p: p.status != "RUNNING" or p.waiting_for_approval,
            update,
            timeout_s,
            f"rollout {rollout_id}",
            f"it goes on without you: fleetctl rollout status {rollout_id}",
        )


def _rollback_result(
    out: Output, arn: str, request: dict[str, Any], args: argparse.Namespace, aborted: str | None
) -> int:
    from fleetctl import rollouts as core
    from fleetctl.views import rollouts as view

    if args.wait:
        with out.progress(f"rollback {request['rollback_id']}: starting") as update:
            run = core.follow(
                lambda: core.rollback_run(arn, request, aborted),
                lambda r: f"rollback {r.rollback_id}: {r.state}",
                lambda r: r.status != "RUNNING",
                update,
                args.timeout,
                f"rollback {request['rollback_id']}",
                f"it goes on without you: fleetctl status {request['endpoint_name']}",
            )
    else:
        run = core.rollback_run(arn, request, aborted)
    out.result(run, lambda: view.render_rollback(run))
    return _rollout_exit(run.status)


def endpoint(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import endpoint_create as core
    from fleetctl.endpoint_spec import EndpointSpecError, build_spec, first_model
    from fleetctl.views import endpoint as view

    ctx = Context(args)
    listed = ctx.fleet.endpoint(args.endpoint_name)
    if listed is None:
        names = ", ".join(sorted(ctx.fleet.endpoint_names()))
        raise CliError(
            ExitCode.USAGE, f"endpoint {args.endpoint_name!r} is not in fleet.yaml", f"fleet.yaml lists: {names}"
        )
    flags = {
        "image_uri": args.image_uri,
        "model_data_url": args.model_data_url,
        "version": args.model_version,
        "execution_role_arn": args.execution_role_arn,
    }
    model, problems = first_model(listed, flags)
    try:
        if model is None:
            raise EndpointSpecError(problems)
        isolated = ctx.fleet.rollout_floors(listed.environment).network_isolation
        spec = build_spec(listed, model, network_isolation=isolated, instance_types=core.instance_types())
    except EndpointSpecError as exc:
        raise CliError(
            ExitCode.USAGE,
            "endpoint create: " + "; ".join(exc.problems),
            "fix the flags or fleet.yaml; nothing changed",
        ) from None
    with out.progress(f"endpoint {spec.endpoint_name}: creating") as update:
        report = core.create(spec, args.wait, args.timeout, update)
    out.result(report, lambda: view.render(report))
    return ExitCode.OK


def model(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import model_package as core
    from fleetctl.views import model as view
    from fleetops.config import VariantConfig

    ctx = Context(args)
    listed = ctx.fleet.endpoint(args.endpoint)
    primary = listed.primary_variant() if listed else None
    report = core.package(
        Path(args.directory),
        Path(args.output),
        Path(args.request),
        endpoint_name=args.endpoint,
        model={"name": args.name, "version": args.model_version, "image_uri": args.image_uri},
        adapter_version=args.adapter_version,
        instance_type=primary.instance_type if primary else str(VariantConfig.model_fields["instance_type"].default),
        upload=args.upload,
    )
    if not report.ok:
        kept = f"{report.tarball} kept, no request written" if report.tarball else "nothing kept or uploaded"
        raise CliError(
            ExitCode.USAGE,
            f"{args.directory} refused: " + "; ".join(report.problems),
            f"fix what each problem names and package again ({kept})",
        )
    out.result(report, lambda: view.render(report))
    return ExitCode.OK


def traffic(args: argparse.Namespace, out: Output) -> int:
    from fleetctl import awsclients
    from fleetctl import traffic as core
    from fleetctl.views import traffic as view
    from fleetops.prescale.calendar_table import CalendarTable
    from fleetops.prescale.demand_history import DemandHistory

    ctx = Context(args)
    listed = ctx.fleet.endpoint(args.endpoint)
    primary = listed.primary_variant() if listed else None
    variant = args.variant or (primary.name if primary else None)
    if variant is None:
        names = ", ".join(sorted(ctx.fleet.endpoint_names()))
        raise CliError(
            ExitCode.USAGE,
            f"endpoint {args.endpoint!r} is not in fleet.yaml: which variant?",
            f"pass --variant, or --fleet with the fleet.yaml that lists it (this one lists: {names})",
        )
    path = Path(args.output or f"{args.endpoint}-{variant}.csv")
    calendar = None
    if ctx.stack_name:
        from fleetctl.stack import CALENDAR_TABLE

        table = CalendarTable(ctx.stack.output(CALENDAR_TABLE), resource=awsclients.dynamodb_resource())
        calendar = (path.with_suffix(".calendar.yaml"), table.one_off_entries())
    history = DemandHistory(awsclients.client("cloudwatch"))
    report = core.export(args.endpoint, variant, args.days, ctx.now, path, history, calendar)
    out.result(report, lambda: view.render(report, primary.name if primary else None))
    return ExitCode.OK


def completion(args: argparse.Namespace, out: Output) -> int:
    """A completion script for ``args.shell``, generated from the parser itself (shtab), so it never drifts."""
    import shtab

    from fleetctl.cli import build_parser

    print(shtab.complete(build_parser(), shell=args.shell))
    return ExitCode.OK


def simulate(argv: Sequence[str]) -> int:
    """``python -m fleetsim`` with the same arguments (its own --help, output and exit codes)."""
    from fleetsim.__main__ import main as fleetsim_main

    try:
        return fleetsim_main(list(argv))
    except SystemExit as exc:  # fleetsim's argparse: --help (0) or a bad flag (2)
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE
