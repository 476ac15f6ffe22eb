"""Who may request and who may approve, as template.yaml grants it (read as CloudFormation reads it).

The requester's and approver's only way in is the signed URL of their function: neither policy may start
the rollout machine, answer a task token or write the approval table, and no role but the request
function's may start a rollout (Step Functions would not tell the rollout who started it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import REPO
from tests.unit.cfn_yaml import load

TEMPLATE = load(REPO / "template.yaml")
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
PEOPLE = {"RolloutRequesterPolicy": "RolloutRequestFunction", "RolloutApproverPolicy": "ApprovalEndpointFunction"}
WRITES = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statements(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """A managed policy's statements, or a SAM function's / state machine's inline policy statements."""
    props = resource["Properties"]
    if "PolicyDocument" in props:
        return _listed(props["PolicyDocument"]["Statement"])
    inline = [p["Statement"] for p in props.get("Policies", []) if isinstance(p, dict) and "Statement" in p]
    return [s for group in inline for s in _listed(group)]


def actions(statement: dict[str, Any]) -> set[str]:
    return set(_listed(statement["Action"]))


@pytest.mark.parametrize(("policy", "function"), PEOPLE.items())
def test_people_reach_their_function_only_through_its_iam_authorised_url(policy: str, function: str) -> None:
    granted = statements(RESOURCES[policy])
    urls = [s for s in granted if "lambda:InvokeFunctionUrl" in actions(s)]
    assert [(s["Resource"], s["Condition"]) for s in urls] == [
        ({"Fn::GetAtt": [function, "Arn"]}, {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}})
    ]
    assert RESOURCES[function]["Properties"]["FunctionUrlConfig"] == {"AuthType": "AWS_IAM"}
    every = set().union(*(actions(s) for s in granted))
    assert not {a for a in every if a.startswith("states:SendTask")}, every
    assert not every & set(WRITES), every
    for statement in granted:
        if "states:StartExecution" in actions(statement):
            assert _listed(statement["Resource"]) == [{"Ref": "RollbackStateMachine"}], statement


def test_only_the_request_function_may_start_a_rollout() -> None:
    starters = set()
    for name, resource in RESOURCES.items():
        if "Properties" not in resource:
            continue
        for statement in statements(resource):
            text = json.dumps(statement.get("Resource"))
            if "states:StartExecution" in actions(statement) and (
                "CanaryRolloutStateMachine" in text or "canary-rollout" in text
            ):
                starters.add(name)
    assert starters == {"RolloutRequestFunction"}
    variables = RESOURCES["RolloutRequestFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["ROLLOUT_STATE_MACHINE_ARN"] == {"Ref": "CanaryRolloutStateMachine"}


def test_the_approval_function_answers_tokens_and_audits_and_fleetctl_finds_both_urls() -> None:
    granted = statements(RESOURCES["ApprovalEndpointFunction"])
    assert any(actions(s) == {"states:SendTaskSuccess", "states:SendTaskFailure"} for s in granted)
    assert any(s["Resource"] == {"Fn::GetAtt": ["AuditTable", "Arn"]} for s in granted)
    outputs = TEMPLATE["Outputs"]
    assert outputs["RolloutRequestUrl"]["Value"] == {"Fn::GetAtt": ["RolloutRequestFunctionUrl", "FunctionUrl"]}
    assert outputs["ApprovalEndpointUrl"]["Value"] == {"Fn::GetAtt": ["ApprovalEndpointFunctionUrl", "FunctionUrl"]}
    assert outputs["RolloutRequesterPolicyArn"]["Value"] == {"Ref": "RolloutRequesterPolicy"}
