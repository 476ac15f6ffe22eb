"""Who may request and who may approve, as template.yaml grants it (read as CloudFormation reads it).

The requester's and approver's only way in is the signed URL of their function: neither policy may start
the rollout machine, answer a task token or write the approval table, and no role but the request
function's may start a rollout (Step Functions would not tell the rollout who started it).
"""

from __future__ import annotations

import json
import re
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


URL_FUNCTIONS = ("RolloutRequestFunction", "ApprovalEndpointFunction")


@pytest.mark.parametrize("function", URL_FUNCTIONS)
def test_the_functions_that_trust_the_urls_context_are_invocable_only_through_their_url(function: str) -> None:
    permissions = [
        r["Properties"]
        for r in RESOURCES.values()
        if r["Type"] == "AWS::Lambda::Permission" and r["Properties"]["FunctionName"] == {"Ref": function}
    ]
    url_only = [(p["Action"], p.get("FunctionUrlAuthType"), p.get("InvokedViaFunctionUrl")) for p in permissions]
    assert sorted(url_only, key=str) == sorted(
        [("lambda:InvokeFunctionUrl", "AWS_IAM", None), ("lambda:InvokeFunction", None, True)], key=str
    )
    assert all(p["Principal"] == {"Ref": "AWS::AccountId"} for p in permissions)
    for policy in PEOPLE:
        invokes = [s for s in statements(RESOURCES[policy]) if "lambda:InvokeFunction" in actions(s)]
        assert all(s["Condition"] == {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}} for s in invokes), invokes


DOC = (REPO / "docs" / "approval-permissions.md").read_text()
PLACEHOLDERS = {
    "${AWS::Partition}": "<partition>",
    "${AWS::Region}": "<region>",
    "${AWS::AccountId}": "<account>",
    "${AWS::StackName}": "<stack>",
}


def _boundary() -> dict[str, dict[str, Any]]:
    [block] = re.findall(r"```json\n(.*?)```", DOC, flags=re.DOTALL)
    policy = json.loads(block)  # what an administrator pastes must parse
    assert policy["Version"] == "2012-10-17"
    return {s["Sid"]: s for s in policy["Statement"]}


def _sub(value: Any) -> str:
    text = str(value["Fn::Sub"])
    for variable, placeholder in PLACEHOLDERS.items():
        text = text.replace(variable, placeholder)
    return text


def _exempt(statement: dict[str, Any]) -> set[str]:
    arns = _listed(statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"])
    return {re.fullmatch(r"arn:<partition>:iam::<account>:role/<stack>-(\w+)Role-\*", a)[1] for a in arns}  # type: ignore[index]


def _granted(action: str, resource: dict[str, Any]) -> set[str]:
    """The template's functions whose own policies grant ``action`` on ``resource``."""
    return {
        name
        for name, r in RESOURCES.items()
        if r["Type"] == "AWS::Serverless::Function"
        for s in statements(r)
        if action in actions(s) and resource in _listed(s["Resource"])
    }


def test_the_boundary_in_the_docs_parses_and_names_the_templates_resources() -> None:
    boundary = _boundary()
    for sid, statement in boundary.items():
        assert statement["Effect"] == "Deny", sid

    tokens = boundary["OnlyTheApprovalFunctionAnswersRolloutTokens"]
    send = next(s for s in statements(RESOURCES["ApprovalEndpointFunction"]) if "states:SendTaskSuccess" in actions(s))
    assert tokens["Resource"] == _sub(send["Resource"])
    assert RESOURCES["CanaryRolloutStateMachine"]["Properties"]["Name"] == {
        "Fn::Sub": "${AWS::StackName}-canary-rollout"
    }
    assert _exempt(tokens) == {"ApprovalEndpointFunction"}

    # The table has no fixed name, so CloudFormation names it <stack>-ApprovalTable-<suffix>; the functions that
    # read it are exactly the ones exempt.
    reads = boundary["OnlyTheApprovalFunctionsReadTheApprovalTable"]
    assert "TableName" not in RESOURCES["ApprovalTable"]["Properties"]
    assert reads["Resource"] == "arn:<partition>:dynamodb:<region>:<account>:table/<stack>-ApprovalTable-*"
    table = {"Fn::GetAtt": ["ApprovalTable", "Arn"]}
    readers = _granted("dynamodb:GetItem", table) | _granted("dynamodb:Scan", table)
    readers |= {
        n
        for n, r in RESOURCES.items()
        if any(
            isinstance(p, dict) and p.get("DynamoDBCrudPolicy") == {"TableName": {"Ref": "ApprovalTable"}}
            for p in r.get("Properties", {}).get("Policies", [])
        )
    }
    assert _exempt(reads) == readers == {"ApprovalEndpointFunction", "ApprovalNotifyFunction", "ApprovalVerifyFunction"}
    for function in readers:
        assert "Role" not in RESOURCES[function]["Properties"], function  # SAM makes <Function>Role

    history = boundary["NobodyReadsRolloutHistories"]
    describe = next(
        s for s in statements(RESOURCES["RolloutRequestFunction"]) if "states:DescribeExecution" in actions(s)
    )
    assert history["Resource"] == _sub(describe["Resource"])  # the rollout machine's executions

    direct = boundary["TheRequestAndApprovalFunctionsOnlyThroughTheirUrls"]
    assert direct["Condition"] == {"BoolIfExists": {"lambda:InvokedViaFunctionUrl": "false"}}
    assert direct["Resource"] == [
        f"arn:<partition>:lambda:<region>:<account>:function:<stack>-{function}-*" for function in URL_FUNCTIONS
    ]
    for function in URL_FUNCTIONS:
        assert "FunctionName" not in RESOURCES[function]["Properties"], function
