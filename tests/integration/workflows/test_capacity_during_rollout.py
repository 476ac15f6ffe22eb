"""Capacity writes go on while a rollout, executed from its ASL file, holds the endpoint's config lease.

The pre-scale reconciler and the alarm responder run as their handlers wire them, against the same emulated
stack as the workflow (lease, audit, kill switch); see ``conftest.py`` for what this project emulates itself.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.aws_resources import create_table
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease, LeaseScope
from fleetops.aws.notifier import Notifier
from fleetops.aws.retry import FAST_RETRY
from fleetops.aws.sagemaker_endpoint import VariantWeights, wait_in_service
from fleetops.aws.switches import KillSwitch
from fleetops.config import load_fleet_config
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.reconciler import PrescaleDeps, reconcile
from fleetops.remediation.alarm import AlarmStateChangeEvent
from fleetops.remediation.models import load_playbook
from fleetops.remediation.responder import Ports, RemediationIncompleteError, Responder, ResponderConfig
from fleetops.remediation.state_table import RemediationStateStore
from fleetops.tables import REMEDIATION_STATE_PK
from tests.conftest import REPO, load_event
from tests.integration.workflows.conftest import HEALTHY, rollout_request

PREFIX = "manga-llm-fleet-prod-remediation-"  # the sample events' stack
RELEASE_NIGHT = {
    "name": "One Piece ch. 1100",
    "start": "2026-12-04T20:00",
    "timezone": "Asia/Tokyo",
    "duration_minutes": 180,
    "multiplier": 3,
    "reason": "One Piece chapter 1100",
}


def register_primary() -> None:
    boto3.client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=f"endpoint/{wf.ENDPOINT}/variant/{wf.PRIMARY}",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=2,
        MaxCapacity=12,
    )


def min_capacity() -> int:
    target = AutoScaling().get_target(wf.ENDPOINT, wf.PRIMARY)
    assert target is not None
    return target.min_capacity


def queue_alarm() -> AlarmStateChangeEvent:
    """The sample queue-depth alarm on the primary, for the workflow's endpoint."""
    text = json.dumps(load_event("alarm_queue_depth_alarm")).replace("manga-chat-prod", wf.ENDPOINT)
    return AlarmStateChangeEvent.model_validate(json.loads(text))


def responder(workflow: wf.RolloutWorkflow) -> Responder:
    env = workflow.environment
    ports = Ports(
        autoscaling=AutoScaling(retry=FAST_RETRY),
        lease=EndpointLease(workflow.lease_table),
        rails=RemediationStateStore(create_table("manga-llm-fleet-remediation", REMEDIATION_STATE_PK)),
        audit=AuditTable(workflow.audit_table),
        notifier=Notifier(workflow.topic_arn),
        kill_switch=KillSwitch(env["KILL_SWITCH_PARAMETER"]),
        weights=VariantWeights(retry=FAST_RETRY),
        wait_ready=lambda name: wait_in_service(name, timeout_s=5, max_wait_s=0.2),
    )
    playbook = load_playbook(REPO / "layers/core/fleet_config/playbook.yaml")
    config = ResponderConfig(playbook, load_fleet_config(wf.FLEET), PREFIX, environment="dev")
    return Responder(config, ports)


def prescale(workflow: wf.RolloutWorkflow) -> PrescaleDeps:
    env = workflow.environment
    calendar = CalendarTable(env["CALENDAR_TABLE"])
    calendar.put("one-piece-1100", RELEASE_NIGHT)
    return PrescaleDeps(
        autoscaling=AutoScaling(retry=FAST_RETRY),
        calendar=calendar,
        audit=AuditTable(workflow.audit_table),
        kill_switch=KillSwitch(env["KILL_SWITCH_PARAMETER"]),
        lease=EndpointLease(workflow.lease_table),
    )


def test_pre_scaling_and_a_scale_out_go_on_during_a_rollout_and_capacity_writers_still_exclude_each_other(
    rollout: wf.RolloutWorkflow,
) -> None:
    register_primary()
    lease = EndpointLease(rollout.lease_table)
    earlier = "prescale/schedule-earlier-run"
    assert lease.acquire(wf.ENDPOINT, earlier, ttl_s=600, scope=LeaseScope.CAPACITY)
    deps, alarms = prescale(rollout), responder(rollout)
    fleet = load_fleet_config(wf.FLEET)  # lists a canary variant for the endpoint, which the rollout sizes
    night_before = datetime(2026, 12, 3, tzinfo=UTC)

    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        # A capacity writer's lease does not hold up the rollout: it takes the config lease and waits for a person.
        execution = wf.start_rollout(rollout_request(approval_steps=[25]))
        link = wf.approval_link(rollout, "approve", execution)
        held = lease.current(wf.ENDPOINT)
        assert held is not None and held.holder == "canary_rollout/llama-q4-v7"
        described = boto3.client("sagemaker").describe_endpoint(EndpointName=wf.ENDPOINT)
        assert {v["VariantName"] for v in described["ProductionVariants"]} == {wf.PRIMARY, "canary"}

        # Two capacity writers still exclude each other: both defer to the earlier run, and say so.
        with pytest.raises(RemediationIncompleteError, match=f"capacity lease held by {earlier}"):
            alarms.respond(queue_alarm())
        deferred = reconcile(fleet, deps, now=night_before, trigger="schedule", dry_run=False, environment="dev")
        assert deferred.deferred_endpoints == [wf.ENDPOINT]
        assert min_capacity() == 2 and AutoScaling().list_scheduled_actions(wf.ENDPOINT, wf.PRIMARY, "prescale-") == []

        # Once it is given back, both write capacity while the rollout still holds its config lease.
        assert lease.release(wf.ENDPOINT, earlier, scope=LeaseScope.CAPACITY)
        scaled = alarms.respond(queue_alarm())
        plan = reconcile(fleet, deps, now=night_before, trigger="schedule", dry_run=False, environment="dev")

        assert scaled.outcomes[0].outcome == "applied" and min_capacity() == 6
        assert [v.variant_name for v in plan.variants] == [wf.PRIMARY]  # the canary's capacity is the rollout's
        assert plan.deferred_endpoints == [] and {c.outcome for c in plan.changes} == {"applied"}
        assert len(AutoScaling().list_scheduled_actions(wf.ENDPOINT, wf.PRIMARY, "prescale-")) == 2
        assert lease.current(wf.ENDPOINT) == held  # holder and fencing token as the rollout took them

        page = wf.submit(link)
        assert page["statusCode"] == 200, page["body"]
        result = wf.wait(execution, timeout_s=90)

    # The rollout's own fencing checks passed after the capacity writes: it promoted and gave its lease back.
    assert result["status"] == "SUCCEEDED", result
    assert lease.current(wf.ENDPOINT) is None
    records = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    skipped = [r.reason for r in records if r.outcome == "skipped"]
    assert any(f"capacity lease held by {earlier}" in reason and "deferred" in reason for reason in skipped)
    assert f"capacity lease held by {earlier}; retried on the next run" in skipped
