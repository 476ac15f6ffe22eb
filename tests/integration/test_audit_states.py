"""The workflows' audit putItem states, executed by the emulator's Step Functions against a real table.

Each state is taken from its ASL file as deployed and run alone in a two-way machine (its success path and its
duplicate-catch path end in ``Continued``, every other catch in ``Failed``). The one change: a fixed record key,
so that a second execution collides with the first the way a retried put collides with its own earlier attempt.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from devtools.aws_resources import create_core_resources
from devtools.state_machines import create_role, start, state_history, wait
from tests.conftest import REPO

DUPLICATE = "DynamoDB.ConditionalCheckFailedException"
INPUT = {
    "plan": {
        "endpoint_name": "manga-chat-prod",
        "rollout_id": "r1",
        "requested_by": "arn:aws:iam::123456789012:user/aiko",
        "new_pointer": {"model": "manga-llm", "version": "v7"},
        "previous_endpoint_config_name": "manga-chat-prod-v6-config",
        "change": {"summary": "base manga-llm v6 -> v7"},
    },
    "next": {"step": {"endpoint_name": "manga-chat-prod", "requested_by": "alarm", "reason": "oom"}},
    "error": {"Error": "States.Timeout", "Cause": "in service too late"},
}


def _audit_states() -> list[Any]:
    found = []
    for path in sorted((REPO / "statemachines").glob("*.asl.json")):
        for name, state in json.loads(path.read_text())["States"].items():
            if state.get("Parameters", {}).get("TableName") == "${AuditTableName}":
                found.append(pytest.param(path.name, name, state, id=f"{path.stem}:{name}"))
    return found


def _alone(state: dict[str, Any], table: str) -> dict[str, Any]:
    state = json.loads(json.dumps(state).replace("${AuditTableName}", table))
    state["Parameters"]["Item"]["record_id"] = {"S": "2026-12-04T20:00:00Z#fixed"}
    for catcher in state["Catch"]:
        catcher["Next"] = "Continued" if catcher["ErrorEquals"] == [DUPLICATE] else "Failed"
    state["Next"] = "Continued"
    states = {"Audit": state, "Continued": {"Type": "Succeed"}, "Failed": {"Type": "Fail", "Error": "AuditFailed"}}
    return {"StartAt": "Audit", "States": states}


@pytest.mark.parametrize(("asl", "name", "state"), _audit_states())
def test_a_repeated_audit_put_keeps_the_first_record_and_the_workflow_continues(
    asl: str, name: str, state: dict[str, Any]
) -> None:
    table = create_core_resources().audit_table
    machine = boto3.client("stepfunctions").create_state_machine(
        name=f"audit-{name}",
        definition=json.dumps(_alone(state, table)),
        roleArn=create_role(f"audit-{name}"),
    )["stateMachineArn"]
    key = {"endpoint_name": {"S": "manga-chat-prod"}, "record_id": {"S": "2026-12-04T20:00:00Z#fixed"}}

    first = wait(start(machine, INPUT, "first"))
    written = boto3.client("dynamodb").get_item(TableName=table, Key=key)["Item"]
    again = wait(start(machine, INPUT, "again"))

    assert (first["status"], again["status"]) == ("SUCCEEDED", "SUCCEEDED"), f"{asl}:{name}"
    assert state_history(again["executionArn"]) == ["Audit", "Continued"]
    assert json.loads(again["output"]) == INPUT  # the duplicate's catch keeps the state's input (ResultPath null)
    assert boto3.client("dynamodb").get_item(TableName=table, Key=key)["Item"] == written  # not overwritten
