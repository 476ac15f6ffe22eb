"""The watch window after a promotion, end to end on the moto server: a primary's error-rate alarm an hour after
its promotion goes through the real alarm responder, which starts the rollback workflow (from its ASL file); the
previous release comes back and the rollback checks that the endpoint's answers name it. The same alarm 25 hours
after the promotion only notifies.

The promotion time is the model pointer's SSM LastModifiedDate (written here as the rollout's UpdatePointer writes
it), so the alarms are dated from it: the emulator's clock cannot be moved. Emulated by this project (see
``conftest.py``): SageMaker updates and the runtime's stand-in answers naming each model's MODEL_VERSION.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import boto3

from devtools import rollout_workflow as wf
from devtools.aws_resources import create_table
from devtools.restored_config import serving_config, serving_restored
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease
from fleetops.aws.notifier import Notifier
from fleetops.aws.sagemaker_endpoint import VariantWeights, wait_in_service
from fleetops.aws.switches import KillSwitch
from fleetops.config import load_fleet_config
from fleetops.remediation.alarm import AlarmStateChangeEvent
from fleetops.remediation.alarm_states import AlarmStates
from fleetops.remediation.last_promotion import LastPromotion
from fleetops.remediation.models import load_playbook
from fleetops.remediation.responder import Ports, Responder, ResponderConfig
from fleetops.remediation.rollback_workflow import RollbackWorkflow
from fleetops.remediation.state_table import RemediationStateStore
from fleetops.tables import REMEDIATION_STATE_PK
from tests.conftest import REPO, load_event
from tests.integration.workflows.test_rollback import OLD_CONFIG, POINTER, PROMOTED_CONFIG, promoted_v7

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions.type_defs import ExecutionListItemTypeDef

PREFIX = "manga-llm-fleet-prod-remediation-"  # the sample event's stack


def responder(workflow: wf.RolloutWorkflow) -> Responder:
    """The alarm responder wired as its handler wires it, on the workflows' stack."""
    core_env = workflow.environment
    ports = Ports(
        autoscaling=AutoScaling(),
        lease=EndpointLease(workflow.lease_table),
        rails=RemediationStateStore(create_table("manga-llm-fleet-remediation-state", REMEDIATION_STATE_PK)),
        audit=AuditTable(workflow.audit_table),
        notifier=Notifier(workflow.topic_arn),
        kill_switch=KillSwitch(core_env["KILL_SWITCH_PARAMETER"]),
        weights=VariantWeights(),
        wait_ready=lambda name: wait_in_service(name, timeout_s=5, max_wait_s=0.2),
        rollback=RollbackWorkflow(workflow.rollback_arn),
        alarm_states=AlarmStates(),
        promotions=LastPromotion(wf.POINTER_PREFIX).get,
    )
    config = ResponderConfig(
        playbook=load_playbook(REPO / "layers/core/fleet_config/playbook.yaml"),
        fleet=load_fleet_config(wf.FLEET),
        alarm_prefix=PREFIX,
    )
    return Responder(config, ports)


def error_rate_alarm(at: datetime) -> AlarmStateChangeEvent:
    """events/alarm_error_rate_primary_alarm.json on the workflows' endpoint, its transition at ``at``."""
    text = json.dumps(load_event("alarm_error_rate_primary_alarm")).replace("manga-chat-prod", wf.ENDPOINT)
    raw = json.loads(text)
    raw["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    raw["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return AlarmStateChangeEvent.model_validate(raw)


def executions(workflow: wf.RolloutWorkflow) -> list[ExecutionListItemTypeDef]:
    listed = boto3.client("stepfunctions").list_executions(stateMachineArn=workflow.rollback_arn)
    return list(listed["executions"])


def test_a_broken_promotion_is_rolled_back_inside_the_watch_window_and_only_notifies_after_it(
    rollout: wf.RolloutWorkflow,
) -> None:
    promoted_v7()
    written = boto3.client("ssm").get_parameter(Name=POINTER)["Parameter"]["LastModifiedDate"]
    promoted_at = written.replace(microsecond=0) + timedelta(seconds=1)  # alarm timestamps have whole seconds
    alarm_responder = responder(rollout)

    # 25 h after the promotion (the window is fleet.yaml's default day): notify only, nothing changes.
    late = alarm_responder.respond(error_rate_alarm(promoted_at + timedelta(hours=25)))

    assert late.outcomes == () and executions(rollout) == []
    assert serving_config(wf.ENDPOINT) == PROMOTED_CONFIG
    [note] = wf.notifications(rollout, wait_s=2)
    assert note["Subject"] == "[ALARM] error-rate on manga-chat/primary (primary): notified"
    assert "Release: v7 promoted 25 h ago, after its 24 h watch window: no automatic rollback." in note["Message"]

    # 1 h after it: the responder starts the rollback workflow, which puts v6 back and checks its answers.
    early = alarm_responder.respond(error_rate_alarm(promoted_at + timedelta(hours=1)))

    [outcome] = early.outcomes
    assert (outcome.action, outcome.outcome) == ("rollback", "applied"), outcome
    why = "watch window: v7 promoted 1 h ago, error-rate alarm: roll back to the previous release"
    assert outcome.reason.startswith(why), outcome.reason
    result = wf.wait(str((outcome.after or {})["execution_arn"]), timeout_s=60)
    assert result["status"] == "SUCCEEDED", result
    restored_config = serving_restored(wf.ENDPOINT, OLD_CONFIG)["EndpointConfigName"]
    assert "Verify" in wf.state_history(result["executionArn"])
    restored = json.loads(boto3.client("ssm").get_parameter(Name=POINTER)["Parameter"]["Value"])
    assert (restored["endpoint_config_name"], restored["version"]) == (OLD_CONFIG, "v6")
    records = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    assert sorted((r.actor, r.action, r.outcome) for r in records) == [
        ("alarm_responder", "rollback:primary", "applied"),  # dated at the alarm, the rollback's at its run
        ("rollback", "rollback", "applied"),
    ]
    assert all(r.reason.startswith(why) for r in records), [r.reason for r in records]
    subjects = [n["Subject"] for n in wf.notifications(rollout, wait_s=2)]
    assert "[ALARM] error-rate on manga-chat/primary (primary, watch window): applied" in subjects
    assert "Rolled back manga-chat" in subjects
    assert wf.pages(rollout) == []

    # Another alarm after the rollback finds no promotion to undo: the fleet never walks back past v6.
    again = alarm_responder.respond(error_rate_alarm(promoted_at + timedelta(hours=2)))
    assert again.outcomes == () and len(executions(rollout)) == 1
    assert serving_config(wf.ENDPOINT) == restored_config
