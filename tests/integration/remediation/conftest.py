"""The alarm responder's world on the moto server: the stack's tables, topic and kill switch, an endpoint
with a primary and a canary variant registered with Application Auto Scaling, and the real playbook."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from devtools.remediation_stack import PLAYBOOK, RemediationStack, create_remediation_stack
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease
from fleetops.aws.notifier import Notifier
from fleetops.aws.retry import FAST_RETRY
from fleetops.aws.sagemaker_endpoint import VariantWeights, wait_in_service
from fleetops.aws.switches import KillSwitch
from fleetops.config import load_fleet_config
from fleetops.remediation.alarm import AlarmStateChangeEvent
from fleetops.remediation.alarm_states import AlarmStates
from fleetops.remediation.models import Playbook, load_playbook
from fleetops.remediation.responder import Ports, Responder, ResponderConfig
from fleetops.remediation.rollback_workflow import RollbackWorkflow
from fleetops.remediation.state_table import RemediationStateStore
from tests.conftest import load_event

STACK = "manga-llm-fleet-prod"  # the stack the sample events in events/ come from
ENDPOINT = "manga-chat-prod"

# The shipped fleet.yaml has no canary yet; the tests add one (floor 1, cap 2) beside the primary (2..12).
FLEET_YAML = """
version: test-1
endpoints:
  - name: manga-chat-prod
    environment: prod
    variants:
      - {name: primary, role: primary, capacity_rps_per_instance: 4, baseline_rps: 12, floor: 2, cap: 12}
      - {name: canary, role: canary, capacity_rps_per_instance: 4, baseline_rps: 1, floor: 1, cap: 2}
"""


class Stack(RemediationStack):
    """The emulated stack plus the reads the tests make."""

    def min_capacity(self, variant: str = "primary") -> int:
        target = AutoScaling().get_target(ENDPOINT, variant)
        assert target is not None
        return target.min_capacity

    def audit(self) -> list[Any]:
        return AuditTable(self.core.audit_table).list(ENDPOINT)

    def serve(self, count: int, variant: str = "primary") -> None:
        """What target tracking does: the variant runs ``count`` instances (``CurrentInstanceCount``), whatever
        its MinCapacity. Needs ``fast_endpoint_updates`` (plain moto drops the weight of a count-only update)."""
        boto3.client("sagemaker").update_endpoint_weights_and_capacities(
            EndpointName=ENDPOINT, DesiredWeightsAndCapacities=[{"VariantName": variant, "DesiredInstanceCount": count}]
        )


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(FLEET_YAML)
    # MinCapacity 2 on a primary whose cap is 12; the canary runs at its floor of 1 (cap 2).
    made = create_remediation_stack(STACK, fleet_path, ENDPOINT, {"primary": (2, 2, 12), "canary": (1, 1, 2)})
    return Stack(**{f.name: getattr(made, f.name) for f in fields(made)})


def build_responder(
    stack: Stack,
    *,
    dry_run: bool = False,
    playbook: Playbook | None = None,
    environment: str | None = None,
    **port_overrides: Any,
) -> Responder:
    """The responder wired exactly as the handler wires it, with the fast retry policy."""
    ports = Ports(
        autoscaling=AutoScaling(retry=FAST_RETRY),
        lease=EndpointLease(stack.core.lease_table),
        rails=RemediationStateStore(stack.state_table),
        audit=AuditTable(stack.core.audit_table),
        notifier=Notifier(stack.core.topic_arn),
        kill_switch=KillSwitch(stack.core.kill_switch_parameter),
        weights=VariantWeights(retry=FAST_RETRY),
        wait_ready=lambda name: wait_in_service(name, timeout_s=5, max_wait_s=0.2),
        rollback=RollbackWorkflow(stack.rollback_arn) if stack.rollback_arn else None,
        alarm_states=AlarmStates(),
    )
    ports = replace(ports, **port_overrides)
    config = ResponderConfig(
        playbook=playbook or load_playbook(PLAYBOOK),
        fleet=load_fleet_config(stack.fleet_path),
        alarm_prefix=stack.prefix,
        dry_run=dry_run,
        environment=environment,
    )
    return Responder(config, ports)


def alarm_event(name: str, *, at: str | None = None, observed: float | None = None) -> AlarmStateChangeEvent:
    """A sample event from events/, optionally moved in time (a new transition) or with another datapoint."""
    raw = load_event(name)
    if at is not None:
        raw["time"] = at
        raw["detail"]["state"]["timestamp"] = at.replace("Z", ".000+0000")
    if observed is not None:
        data = json.loads(raw["detail"]["state"]["reasonData"])
        data["recentDatapoints"] = [observed]
        raw["detail"]["state"]["reasonData"] = json.dumps(data)
    return AlarmStateChangeEvent.model_validate(raw)


@pytest.fixture
def fast_endpoint_updates() -> Iterator[None]:
    """The project's emulator extensions (SageMaker: weight 0 kept, real Updating state; a variant's count follows
    its scalable target's limits, as Application Auto Scaling does), updates settling at once."""
    from devtools import emulator_extensions
    from devtools.emulator_extensions import sagemaker as extension

    emulator_extensions.install()
    saved = extension.behaviour.update_seconds
    extension.behaviour.update_seconds = 0.0
    yield
    extension.behaviour.update_seconds = saved
