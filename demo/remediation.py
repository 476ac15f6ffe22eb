"""Demo part 2: alarm-driven remediation through the real alarm responder handler on emulated AWS.

A queue-depth breach on the primary and a CUDA OOM on the canary arrive as EventBridge alarm events
(``events/alarm_*.json``); the responder decides from the playbook, changes the emulated fleet, notifies,
and leaves an audit trail, which is printed at the end.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import boto3
import yaml

from devtools.emulator import MotoServer
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.lambda_dispatch import FakeLambdaContext
from devtools.remediation_stack import RemediationStack, cold_start, create_remediation_stack
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.variant_weights import VariantWeights

REPO = Path(__file__).resolve().parents[1]
STACK = "manga-llm-fleet-prod"
ENDPOINT = "manga-chat-prod"
CANARY = {
    "name": "canary",
    "role": "canary",
    "capacity_rps_per_instance": 4.0,
    "baseline_rps": 1.0,
    "floor": 1,
    "cap": 2,
}


def _event(name: str, at: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((REPO / "events" / f"{name}.json").read_text())
    if at is not None:  # the same alarm, a later transition
        event["time"] = at
        event["detail"]["state"]["timestamp"] = at.replace("Z", ".000+0000")
    return event


def _fleet_with_canary(folder: Path) -> Path:
    """The shipped fleet.yaml, plus the canary variant a rollout would have added to manga-chat-prod."""
    fleet = yaml.safe_load((REPO / "layers/core/fleet_config/fleet.yaml").read_text())
    endpoint = next(e for e in fleet["endpoints"] if e["name"] == ENDPOINT)
    if not any(v["role"] == "canary" for v in endpoint["variants"]):
        endpoint["variants"].append(CANARY)
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    return path


def _invoke(handler: Any, event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = handler.lambda_handler(event, FakeLambdaContext(function_name="alarm-responder"))
    return result


def _story(result: dict[str, Any], stack: RemediationStack) -> None:
    print(
        f"    responder: {result['status']} {result.get('kind')} on {result.get('endpoint_name')}/"
        f"{result.get('variant_name')} ({result.get('role')}), state {result.get('state')}"
    )
    for outcome in result["outcomes"]:
        print(f"      - {outcome['action']}: {outcome['outcome'].upper()} - {outcome['reason']}")
    if not result["outcomes"]:
        print("      - (no fleet action for this kind and role)")
    for note in stack.notifications():
        print(f"    notification: {note['Subject']}")
        for line in note["Message"].splitlines():
            print(f"      | {line}")


def _capacity(variant: str = "primary") -> str:
    target = AutoScaling().get_target(ENDPOINT, variant)
    return f"MinCapacity {target.min_capacity} / MaxCapacity {target.max_capacity}" if target else "not registered"


def run(emulator: MotoServer) -> None:
    emulated_sagemaker.install()  # keeps a canary weight of 0, which plain moto drops
    saved_update_seconds = emulated_sagemaker.behaviour.update_seconds
    emulated_sagemaker.behaviour.update_seconds = 0.0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fleet = _fleet_with_canary(Path(tmp))
            stack = create_remediation_stack(STACK, fleet, ENDPOINT, {"primary": (2, 2, 12), "canary": (1, 1, 2)})
            boto3.client("sagemaker").update_endpoint_weights_and_capacities(
                EndpointName=ENDPOINT,
                DesiredWeightsAndCapacities=[
                    {"VariantName": "primary", "DesiredWeight": 0.9},
                    {"VariantName": "canary", "DesiredWeight": 0.1},
                ],
            )
            stack.extra_env["POWERTOOLS_LOG_LEVEL"] = "ERROR"  # the demo prints the story; JSON logs would drown it
            _run_story(emulator, stack)
    finally:
        emulated_sagemaker.behaviour.update_seconds = saved_update_seconds


def _run_story(emulator: MotoServer, stack: RemediationStack) -> None:
    print(f"Emulated AWS at {emulator.endpoint_url}. Endpoint {ENDPOINT!r}: primary ({_capacity()}, cap 12),")
    print(
        f"canary at weight {VariantWeights().weights(ENDPOINT)['canary']:.1f}. Playbook: "
        "layers/core/fleet_config/playbook.yaml; alarms named "
        f"{stack.prefix}<kind>-<endpoint>-<variant>."
    )
    with cold_start(stack) as handler:
        print("\n--- 19:02 UTC  queue depth 180 on the primary (alarm threshold 50 for 60 s)")
        print(f"    before: {_capacity()}")
        _story(_invoke(handler, _event("alarm_queue_depth_alarm")), stack)
        print(f"    after:  {_capacity()}   (the target-tracking policy may still scale in slowly later)")

        print("\n--- 19:02 UTC  EventBridge delivers the same event again (at-least-once)")
        again = _invoke(handler, _event("alarm_queue_depth_alarm"))
        print(f"    answered from the idempotency table: same result, {_capacity()} - no second step")
        stack.notifications()
        assert again["outcomes"][0]["outcome"] == "applied"

        print("\n--- 19:04 UTC  the alarm flaps OK -> ALARM two minutes later")
        _story(_invoke(handler, _event("alarm_queue_depth_alarm", at="2026-11-21T19:04:00Z")), stack)

        print("\n--- 19:05 UTC  CUDA OOM caught on the canary")
        print(f"    weights before: {VariantWeights().weights(ENDPOINT)}")
        _story(_invoke(handler, _event("alarm_oom_canary_alarm")), stack)
        print(
            f"    weights after:  {VariantWeights().weights(ENDPOINT)}  (no ROLLBACK_STATE_MACHINE_ARN here: "
            "the responder pulled the canary itself)"
        )

        print("\n--- 19:31 UTC  queue depth back to 12: ALARM -> OK")
        _story(_invoke(handler, _event("alarm_queue_depth_ok")), stack)
        print(f"    capacity stays: {_capacity()} - the responder never scales in")

    print(f"\n--- Audit trail of {ENDPOINT} (audit table {stack.core.audit_table})")
    print(f"    {'event time':<20} {'actor':<16} {'action':<24} {'outcome':<8} reason")
    for record in AuditTable(stack.core.audit_table).list(ENDPOINT):
        when = f"{record.at:%Y-%m-%d %H:%M:%S}"
        print(f"    {when:<20} {record.actor:<16} {record.action:<24} {record.outcome:<8} {record.reason}")
