"""``status_seconds``: ``fleetctl status`` end to end on the emulator (target under 2 s); ``cli_import_ms``.

The stack is the tests' (``devtools.operator_stack``: the workflows, tables and a CloudFormation stack whose
outputs name them) with a week of the reconciler's scheduled actions and their audit records, a model pointer
and the remediation alarms. Each sample is a fresh ``python -m fleetctl status`` process, as an operator runs
it: interpreter start, imports, ``DescribeStacks`` and every read ``status`` makes against the moto server on
loopback, rendering; the median of the samples is reported (the first, with cold bytecode caches, is apart).

``cli_import_ms`` is what importing the command line module adds to a bare interpreter: the medians of fresh
``python -c "import fleetctl.cli"`` and ``python -c pass`` processes, interleaved, subtracted.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime

import boto3

from devtools import operator_stack
from devtools import rollout_workflow as wf
from devtools.alarms import create_alarms
from devtools.emulator import moto_server
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease
from fleetops.aws.switches import KillSwitch
from fleetops.config import load_fleet_config
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.reconciler import PrescaleDeps, reconcile
from fleetops.rollout.pointer import Pointer

REPO = operator_stack.REPO
STATUS_REPEATS = 7
IMPORT_REPEATS = 15
TARGET_S = 2.0


def _populate(stack: operator_stack.OperatorStack) -> None:
    env = stack.workflow.environment
    calendar = CalendarTable(env["CALENDAR_TABLE"])
    calendar.put(
        "one-piece-1100",
        {
            "name": "One Piece ch. 1100",
            "start": "2026-12-04T20:00",
            "timezone": "Asia/Tokyo",
            "duration_minutes": 180,
            "multiplier": 3,
        },
    )
    deps = PrescaleDeps(
        autoscaling=AutoScaling(),
        calendar=calendar,
        audit=AuditTable(env["AUDIT_TABLE"]),
        kill_switch=KillSwitch(env["KILL_SWITCH_PARAMETER"]),
        lease=EndpointLease(env["LEASE_TABLE"]),
    )
    fleet = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
    now = datetime(2026, 11, 30, 23, 45, tzinfo=UTC)
    reconcile(fleet, deps, now=now, trigger="schedule", dry_run=False, environment="prod")  # the prod stack's view
    pointer = Pointer(
        model="manga-llama",
        version="v6",
        sagemaker_model="manga-chat-prod-v6-model",
        endpoint_config_name="manga-chat-prod-v6-config",
    )
    boto3.client("ssm").put_parameter(
        Name=f"{wf.POINTER_PREFIX}/{operator_stack.ENDPOINT}", Value=pointer.to_json(), Type="String"
    )
    create_alarms(operator_stack.STACK, {"RemediatedEndpointName": operator_stack.ENDPOINT})


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - start


def _status_seconds() -> dict[str, float]:
    with moto_server():
        stack = operator_stack.deploy()
        _populate(stack)
        env = {**os.environ, "FLEETCTL_STACK": stack.name, "PYTHONPATH": f"{REPO / 'layers/core'}{os.pathsep}{REPO}"}
        command = [sys.executable, "-m", "fleetctl", "--now", "2026-12-01T00:00:00Z", "status"]
        first = _timed(command, env)
        samples = [_timed(command, env) for _ in range(STATUS_REPEATS)]
    median = statistics.median(samples)
    return {
        "status_seconds": round(median, 3),
        "status_seconds_first": round(first, 3),
        "status_seconds_max": round(max(samples), 3),
        "status_under_target": float(median < TARGET_S),
        "status_samples": float(STATUS_REPEATS),
    }


def _import_ms() -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'layers/core'}{os.pathsep}{REPO}"}
    module = [sys.executable, "-c", "import fleetctl.cli"]
    bare = [sys.executable, "-c", "pass"]
    _timed(module, env)  # bytecode caches written once, as an installed package has them
    ours, base = [], []
    for _ in range(IMPORT_REPEATS):
        ours.append(_timed(module, env))
        base.append(_timed(bare, env))
    ours_ms, base_ms = statistics.median(ours) * 1000, statistics.median(base) * 1000
    return {
        "cli_import_ms": round(ours_ms - base_ms, 2),
        "cli_process_ms": round(ours_ms, 2),
        "bare_python_ms": round(base_ms, 2),
        "import_samples": float(IMPORT_REPEATS),
    }


def run() -> dict[str, float]:
    return _status_seconds() | _import_ms()
