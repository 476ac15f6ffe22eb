"""The ``fleetctl`` command line: parse, hand over to one command function, turn errors into exit codes.

Importing this module is cheap (argparse only): boto3, pydantic and rich load when a command needs them,
so ``fleetctl --help`` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fleetctl.errors import EXIT_CODE_HELP, CliError, ExitCode

DESCRIPTION = """\
See, explain and undo what the fleet's automation does, one command per question:
  status      what the endpoint runs now and what will change it next
  why         the audit trail: who or what changed it, why, before -> after
  plan        what the pre-scaler would do at a given time (dry run)
  calendar    list, add or remove one-off releases
  rollout     start, follow, approve, reject or abort a canary rollout
  rollback    return the endpoint to the model before the last promotion
  kill-switch stop (engage) or resume (release) every automated change
  simulate    the capacity simulator (python -m fleetsim)
  traffic     export a variant's own traffic from CloudWatch for the simulator to replay
  endpoint    create the first endpoint from fleet.yaml (model, config, endpoint, scalable targets)
  model       package a model folder as model.tar.gz, check it, print its digests
  completion  print a shell completion script (bash, zsh, tcsh)"""

EPILOG = f"""\
The stack is named with --stack or FLEETCTL_STACK; every resource is found from its outputs.
{EXIT_CODE_HELP}"""


def _common(json_default: object, suppress: bool) -> argparse.ArgumentParser:
    """Options accepted before and after the subcommand (the subcommand's copy does not reset the other's)."""
    default = argparse.SUPPRESS if suppress else None
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("common options")
    group.add_argument("--stack", default=default, help="the deployed stack (default: $FLEETCTL_STACK)", metavar="NAME")
    group.add_argument("--region", default=default, help="AWS region (default: AWS_REGION or the profile's)")
    group.add_argument("--profile", default=default, help="AWS profile (default: AWS_PROFILE)")
    group.add_argument("--json", action="store_true", default=json_default, help="one JSON document on stdout")
    group.add_argument(
        "--fleet", default=default, help="fleet.yaml (default: the one in this checkout, deployed with the layer)"
    )
    group.add_argument("--now", default=default, help=argparse.SUPPRESS)  # reproducible runs (tests, bench)
    return common


if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _command(
    sub: Subparsers,
    name: str,
    target: str,
    help_text: str,
    parents: list[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help_text,
        description=help_text,
        parents=parents,
        epilog=EXIT_CODE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(target=target)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetctl",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common(False, suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"fleetctl {version()}")
    common = [_common(argparse.SUPPRESS, suppress=True)]
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_status_and_why(sub, common)
    kill = _command(sub, "kill-switch", "kill_switch", "stop or resume every automated fleet change", common)
    kill.add_argument("action", choices=["engage", "release", "status"])
    kill.add_argument("--reason", default="", help="why (recorded in the audit trail)")
    _add_calendar(sub, common)
    plan = _command(sub, "plan", "plan", "dry run of the pre-scale reconciler at a time, as a timeline", common)
    plan.add_argument("endpoint", nargs="?", help="default: every endpoint the stack manages")
    plan.add_argument("--at", default="now", help="the moment to plan at (default now), e.g. 2026-12-04T09:00")
    plan.add_argument("--timezone", default="UTC", help="zone of --at without an offset, and of the timeline")
    _add_rollout(sub, common)
    rollback = _command(
        sub, "rollback", "rollback", "return the endpoint to the config before the last promotion", common
    )
    rollback.add_argument("endpoint", nargs="?", help="default: the stack's RemediatedEndpointName")
    rollback.add_argument("--reason", required=True, help="why (audited, and in the notification)")
    _wait_options(rollback, default_wait=True)
    _add_endpoint_and_model(sub, common)
    simulate = _command(sub, "simulate", "simulate", "the capacity simulator (python -m fleetsim)", [])
    simulate.add_argument("args", nargs=argparse.REMAINDER, help="fleetsim's arguments (fleetctl simulate --help)")
    _add_traffic(sub, common)
    completion = _command(sub, "completion", "completion", "print a shell completion script", [])
    completion.add_argument("shell", choices=["bash", "zsh", "tcsh"], help='e.g. eval "$(fleetctl completion bash)"')
    return parser


def version() -> str:
    """The installed project's version (pyproject.toml), or what to do when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("manga-llm-fleet")
    except metadata.PackageNotFoundError:
        return "(not installed: pip install . or make install)"


def _simulate_argv(argv: list[str]) -> list[str] | None:
    """fleetsim's arguments when the command is ``simulate`` (global --json passed on), else None."""
    first = next((i for i, token in enumerate(argv) if not token.startswith("-")), None)
    if first is None or argv[first] != "simulate" or any(t not in ("--json",) for t in argv[:first]):
        return None
    return (["--json"] if "--json" in argv[:first] else []) + argv[first + 1 :]


def _add_status_and_why(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    status = _command(sub, "status", "status", "variants, capacity, next scheduled actions, alarms, rollout", common)
    status.add_argument("endpoint", nargs="?", help="default: the stack's RemediatedEndpointName")
    status.add_argument("--actions", type=int, default=5, help="how many upcoming scheduled actions (default 5)")
    why = _command(sub, "why", "why", "the audit trail as a timeline: who or what, why, before -> after", common)
    why.add_argument("endpoint", nargs="?", help="default: the stack's RemediatedEndpointName")
    why.add_argument("--since", default="24h", help="a duration (30m, 6h, 2d, 1w) or a time (default 24h)")
    why.add_argument("--timezone", default="UTC", help="zone of --since times without an offset (default UTC)")
    why.add_argument(
        "--actor", help="only this writer (prescale, alarm_responder, canary_rollout, approval, rollback, ...)"
    )


def _add_calendar(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    calendar = _command(sub, "calendar", "calendar", "one-off releases in the calendar table", common)
    cal = calendar.add_subparsers(dest="calendar_action", metavar="ACTION", required=True)
    cal.add_parser(
        "list", help="every calendar entry, whether it is valid, and its size in each endpoint's plan", parents=common
    )
    add = cal.add_parser(
        "add",
        help="add a one-off release, or any entry from a file (validated as the reconciler validates it)",
        parents=common,
        description="Add a one-off release from the flags, or an entry of any kind (yearly, recurring, off_peak) "
        "from --file. The reconciler picks it up within a minute.",
    )
    add.add_argument("--file", help="one entry of any kind as YAML or JSON (README, release calendar); - reads stdin")
    add.add_argument("--name", help="e.g. 'One Piece ch. 1100'")
    add.add_argument("--start", help="local wall-clock time in --timezone, e.g. 2026-12-04T20:00")
    add.add_argument("--timezone", help="IANA zone, e.g. Asia/Tokyo")
    length = add.add_mutually_exclusive_group()
    length.add_argument("--duration", type=int, help="minutes")
    length.add_argument("--end", help="local end time, e.g. 2026-12-04T23:00")
    add.add_argument("--multiplier", type=float, help="traffic relative to the baseline, e.g. 3")
    add.add_argument("--reason", default="", help="shown in plans, scheduled actions and the audit trail")
    add.add_argument("--endpoint", action="append", default=[], help="only this endpoint (repeat; default all)")
    add.add_argument("--id", dest="event_id", help="the row's key (default: derived from --name)")
    add.add_argument("--replace", action="store_true", help="overwrite an entry with the same id")
    remove = cal.add_parser("remove", help="remove a one-off release by id", parents=common)
    remove.add_argument("event_id", metavar="ID")


def _add_rollout(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    rollout = _command(sub, "rollout", "rollout", "canary rollouts: start, status, approve, reject, abort", common)
    ro = rollout.add_subparsers(dest="rollout_action", metavar="ACTION", required=True)
    start = ro.add_parser("start", help="start a rollout from a request file (JSON)", parents=common)
    start.add_argument("file", help="the request (README, Operate), e.g. rollout.json; - reads stdin")
    _wait_options(start, default_wait=False)
    status = ro.add_parser("status", help="one rollout, or every rollout in flight", parents=common)
    status.add_argument("rollout_id", nargs="?", metavar="ROLLOUT_ID")
    approve = ro.add_parser("approve", help="approve the step a rollout waits at", parents=common)
    approve.add_argument("rollout_id", metavar="ROLLOUT_ID")
    reject = ro.add_parser("reject", help="reject the step a rollout waits at (it rolls back)", parents=common)
    reject.add_argument("rollout_id", metavar="ROLLOUT_ID")
    reject.add_argument("--reason", required=True, help="why (recorded with the decision)")
    abort = ro.add_parser("abort", help="abort a rollout in flight: back to the config it started from", parents=common)
    abort.add_argument("rollout_id", metavar="ROLLOUT_ID")
    abort.add_argument("--reason", required=True, help="why (audited, and in the notification)")
    _wait_options(abort, default_wait=True)


def _add_endpoint_and_model(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    endpoint = _command(sub, "endpoint", "endpoint", "create the first endpoint from fleet.yaml", common)
    ep = endpoint.add_subparsers(dest="endpoint_action", metavar="ACTION", required=True)
    create = ep.add_parser(
        "create",
        help="models, endpoint config, endpoint and scalable targets from fleet.yaml; an existing endpoint is kept",
        parents=common,
        description="Create the endpoint fleet.yaml names, serving a first model on its primary variants: instance "
        "type, floor (initial count), cap, AMI and timeouts from fleet.yaml. Needs no stack: run it before sam "
        "deploy. Flags override the endpoint's initial_model in fleet.yaml.",
    )
    create.add_argument("endpoint_name", metavar="ENDPOINT", help="an endpoint fleet.yaml lists")
    create.add_argument("--image-uri", help="the ECR image (ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG)")
    create.add_argument("--model-data-url", help="s3://.../model.tar.gz (fleetctl model package --upload)")
    create.add_argument("--model-version", help="the model version, e.g. v1 (names the model and config)")
    create.add_argument("--execution-role-arn", help="the model execution role (the stack's ModelExecutionRoleArn)")
    _wait_options(create, default_wait=True, timeout=1800.0)
    model = _command(sub, "model", "model", "model artifacts: package, check, digest", common)
    mo = model.add_subparsers(dest="model_action", metavar="ACTION", required=True)
    package = mo.add_parser(
        "package",
        help="model.tar.gz in SageMaker's layout, checked by the artifact gate, with its sha256 digests",
        parents=common,
        description="Pack DIR (the base model at its root, LoRA adapters in folders of their own) as model.tar.gz, "
        "run the rollout's artifact gate on it, print the base and adapter digests, optionally upload it, and write "
        "a rollout request with them filled in.",
    )
    package.add_argument("directory", metavar="DIR", help="the model folder")
    package.add_argument("--output", default="model.tar.gz", help="where to write the tarball (default model.tar.gz)")
    package.add_argument("--upload", metavar="S3_PREFIX", help="upload to S3_PREFIX/model.tar.gz, e.g. s3://b/m/v7")
    package.add_argument(
        "--request", default="rollout.json", help="the rollout request to write (default rollout.json)"
    )
    package.add_argument("--name", default="manga-llama", help="model family in the registry (default manga-llama)")
    package.add_argument("--model-version", required=True, help="the version, e.g. v7")
    package.add_argument("--endpoint", default="manga-chat-prod", help="the endpoint the request rolls out to")
    package.add_argument("--image-uri", default="", help="the image the request deploys")
    package.add_argument("--adapter-version", default="v1", help="version of adapters not named ADAPTER/VERSION")


def _add_traffic(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    traffic = _command(sub, "traffic", "traffic", "a variant's own traffic, for the simulator to replay", common)
    tr = traffic.add_subparsers(dest="traffic_action", metavar="ACTION", required=True)
    export = tr.add_parser(
        "export",
        help="the variant's Invocations per five minutes as the CSV fleetctl simulate --trace replays",
        parents=common,
        description="Write the variant's CloudWatch Invocations (Sum, five-minute periods, as the pre-scale "
        "reconciler reads them) as time,requests rows, and print the fleetctl simulate command that replays them. "
        "With the stack named, the calendar table's entries are written beside it (FILE.calendar.yaml).",
    )
    export.add_argument("endpoint", metavar="ENDPOINT", help="the SageMaker endpoint, e.g. manga-chat-prod")
    export.add_argument("--variant", help="default: the endpoint's primary variant in fleet.yaml")
    export.add_argument("--days", type=int, default=28, help="days back from now (default 28, at most 63)")
    export.add_argument("--output", help="the CSV to write (default ENDPOINT-VARIANT.csv)")


def _wait_options(parser: argparse.ArgumentParser, default_wait: bool, timeout: float = 900.0) -> None:
    wait = parser.add_mutually_exclusive_group()
    wait.add_argument("--wait", dest="wait", action="store_true", default=default_wait, help="follow it to the end")
    wait.add_argument("--no-wait", dest="wait", action="store_false", help="return once it has started")
    parser.add_argument("--timeout", type=float, default=timeout, help=f"seconds --wait waits (default {timeout:g})")


def _environment(args: argparse.Namespace) -> None:
    """--region/--profile apply to every AWS client of the process, fleetops' adapters included."""
    if getattr(args, "region", None):
        os.environ["AWS_REGION"] = os.environ["AWS_DEFAULT_REGION"] = args.region
    if getattr(args, "profile", None):
        os.environ["AWS_PROFILE"] = args.profile


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (see :class:`~fleetctl.errors.ExitCode`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    simulated = _simulate_argv(argv)
    if simulated is not None:  # everything after it is fleetsim's, --help included
        from fleetctl.commands import simulate

        return simulate(simulated)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed usage (exit 2) or help (exit 0)
        return int(exc.code or 0) if not isinstance(exc.code, str) else int(ExitCode.USAGE)
    _environment(args)
    from fleetctl.output import Output

    out = Output(json_mode=bool(args.json))
    try:
        command = getattr(importlib.import_module("fleetctl.commands"), args.target)
        return int(command(args, out))
    except CliError as error:
        out.error(error)
        return int(error.exit_code)
    except KeyboardInterrupt:
        out.error(CliError(ExitCode.FAILED, "interrupted", "run the command again; what it started keeps going"))
        return 130
    except Exception as exc:
        from fleetctl.aws_errors import translate

        known = translate(exc)
        if known is None:
            raise
        out.error(known)
        return int(known.exit_code)


def run() -> None:
    """Console-script entry point (``[project.scripts]``)."""
    sys.exit(main())
