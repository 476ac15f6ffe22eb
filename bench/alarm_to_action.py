"""``alarm_to_action_p50_ms``: a queue-depth alarm event in -> MinCapacity changed on the emulator. (The
responder's cold import, as deployed, is measured with every other handler's by bench/handler_import.py.)

The event goes through the real handler (``functions/alarm_responder/app.py``: validation, Powertools
idempotency on DynamoDB, kill switch, lease, InService wait, Application Auto Scaling, audit, SNS) against a
moto server over HTTP on loopback. Each repeat is a new alarm transition one hour after the previous one
(so cooldown and the hourly rate limit allow it) on a target reset to MinCapacity 2 outside the timing; the
clock stops when ``DescribeScalableTargets`` shows the new MinCapacity. The first event (clients built,
caches cold) is reported apart from the median of the rest.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._importtime import REPO
from devtools.emulator import moto_server
from devtools.lambda_dispatch import FakeLambdaContext
from devtools.remediation_stack import cold_start, create_remediation_stack
from fleetops.aws.autoscaling import AutoScaling

REPEATS = 15
DEADLINE_S = 10.0  # per event: a change that has not landed by then counts as a failure
STACK = "manga-llm-fleet-prod"
ENDPOINT = "manga-chat-prod"
FLEET_YAML = """
version: bench
endpoints:
  - name: manga-chat-prod
    environment: prod
    variants:
      - {name: primary, role: primary, capacity_rps_per_instance: 4, baseline_rps: 12, floor: 2, cap: 12}
"""


def _event(at: datetime) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((REPO / "events/alarm_queue_depth_alarm.json").read_text())
    event["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return event


def _time_events(module: Any, autoscaling: AutoScaling) -> list[float]:
    samples = []
    start_at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
    for i in range(REPEATS + 1):
        autoscaling.set_capacity(ENDPOINT, "primary", 2, 12)
        event = _event(start_at + timedelta(hours=i))
        began = time.perf_counter()
        module.lambda_handler(event, FakeLambdaContext(function_name="alarm-responder"))
        while True:
            target = autoscaling.get_target(ENDPOINT, "primary")
            if target is not None and target.min_capacity == 6:  # 180 vs 50 -> step +4
                break
            if time.perf_counter() - began > DEADLINE_S:
                raise RuntimeError(f"event {i}: capacity did not change within {DEADLINE_S}s")
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def run() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, moto_server():
        fleet = Path(tmp) / "fleet.yaml"
        fleet.write_text(FLEET_YAML)
        stack = create_remediation_stack(STACK, fleet, ENDPOINT, {"primary": (2, 2, 12)})
        # The handler's JSON logs and EMF lines go to /dev/null: printing them would be timed too.
        with open(os.devnull, "w") as sink, redirect_stdout(sink), cold_start(stack) as module:
            samples = _time_events(module, AutoScaling())
    rest = samples[1:]
    return {
        "alarm_to_action_p50_ms": round(statistics.median(rest), 2),
        "alarm_to_action_p90_ms": round(statistics.quantiles(rest, n=10)[-1], 2),
        "alarm_to_action_first_ms": round(samples[0], 2),
        "alarm_to_action_samples": float(len(rest)),
    }
