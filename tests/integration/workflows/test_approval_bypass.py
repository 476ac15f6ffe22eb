"""Requester and approver stay two people whatever the caller tries: the rollout executed from its ASL on moto.

Lambda tasks and the two function URLs run the project's real handlers (``devtools.lambda_dispatch``, the
project's emulation of Lambda's runtime); the URL events are those Lambda gives an IAM-signed request. A
direct ``lambda:Invoke`` goes through moto's Lambda API to the same handlers.
"""

from __future__ import annotations

import json
from typing import Any

import boto3

from devtools import rollout_workflow as wf
from devtools.lambda_dispatch import dispatch_lambdas
from devtools.state_machines import create_functions, create_role
from fleetops.aws.audit_table import AuditTable
from fleetops.rollout.approval_verify import UNVERIFIED_ACTION, UNVERIFIED_ERROR
from tests.integration.workflows.conftest import HEALTHY, rollout_request

ACCOUNT = "123456789012"
DEPLOYER_ALICE = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/alice"
DEPLOYER_BOB = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/bob"
SSO_KENJI = f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_ReleaseApprover_5c1d2e3f4a5b6c7d/kenji"


def canary_weight() -> float:
    return wf.canary_weight()


def audit_actions(rollout: wf.RolloutWorkflow) -> list[tuple[str, str]]:
    return [(r.action, r.outcome) for r in AuditTable(rollout.audit_table).list(wf.ENDPOINT)]


def test_another_session_of_the_requesters_role_cannot_approve_but_an_sso_user_can(
    rollout: wf.RolloutWorkflow,
) -> None:
    request = rollout_request(steps=[5, 100], approval_steps=[5])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(request, caller=DEPLOYER_ALICE)
        link = wf.approval_link(rollout, "approve", execution)
        # Alice assumes the same role again as "bob": the session name is hers to choose, so it is not bob.
        own = wf.submit(link, caller=DEPLOYER_BOB)
        assert own["statusCode"] == 403, own["body"]
        assert "may be one person: a session of role Deployer is named by whoever assumes the role" in own["body"]
        assert "IAM Identity Center" in own["body"] and "SourceIdentity" in own["body"]  # what to do instead
        page = wf.submit(link, caller=SSO_KENJI)
        assert page["statusCode"] == 200, page["body"]
        result = wf.wait(execution, timeout_s=90)

    assert result["status"] == "SUCCEEDED", result
    decided = [r for r in AuditTable(rollout.audit_table).list(wf.ENDPOINT) if r.action == "approve"]
    assert [(r.after or {}).get("decided_by") for r in decided] == [SSO_KENJI]
    assert (decided[0].after or {}).get("requested_by") == DEPLOYER_ALICE


def test_a_direct_invoke_with_a_forged_caller_is_refused(rollout: wf.RolloutWorkflow) -> None:
    """Someone with lambda:InvokeFunction calls the functions directly, naming whoever they like as the caller."""
    arns = create_functions(["rollout-request", "approval-endpoint"], create_role("url-functions"))
    awslambda = boto3.client("lambda")

    def invoke(function: str, event: dict[str, Any]) -> dict[str, Any]:
        with dispatch_lambdas({"rollout-request": "rollout_request", "approval-endpoint": "approval_endpoint"}):
            answer = awslambda.invoke(FunctionName=arns[function], Payload=json.dumps(event).encode())
        result: dict[str, Any] = json.loads(answer["Payload"].read())
        return result

    request = {k: v for k, v in rollout_request().items() if k != "requested_by"}
    forged_url_event = wf.url_event("POST", wf.REQUEST_URL, "arn:aws:iam::210987654321:user/bob", json_body=request)
    cases = [
        ("rollout-request", request | {"requested_by": wf.APPROVER}, "fields no function URL request has"),
        ("rollout-request", {"caller": wf.APPROVER, "body": json.dumps(request)}, "fields no function URL request"),
        ("rollout-request", forged_url_event, "is not of this function's account 123456789012"),
        (
            "approval-endpoint",
            {"rollout_id": request["rollout_id"], "decision": "approve", "decided_by": wf.APPROVER},
            "fields no function URL request has",
        ),
        (
            "approval-endpoint",
            wf.url_event("POST", wf.APPROVAL_URL, None, json_body={"rollout_id": "x", "decision": "approve"}),
            "the request carries no IAM identity",
        ),
    ]
    for function, event, says in cases:
        answer = invoke(function, event)
        # What the caller sees: 403 and why, and to call the URL instead.
        assert answer["statusCode"] == 403, (function, answer)
        message = json.loads(answer["body"])["message"]
        assert says in message and "call the URL" in message, message

    assert boto3.client("stepfunctions").list_executions(stateMachineArn=rollout.rollout_arn)["executions"] == []
    assert boto3.client("dynamodb").scan(TableName=rollout.approval_table)["Items"] == []


def test_a_forged_requested_by_in_start_execution_does_not_let_the_requester_approve(
    rollout: wf.RolloutWorkflow,
) -> None:
    """Hana starts the rollout machine herself (states:StartExecution), naming Ayumi as the requester."""
    request = rollout_request(steps=[5, 100], approval_steps=[5]) | {"requested_by": wf.APPROVER}
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
        result = wf.wait(execution, timeout_s=90)

    # No approval is ever issued (there is nothing for Hana to approve): the step fails and the rollout rolls back.
    assert result["status"] == "FAILED" and result["error"] == "RolledBack", result
    assert "RequesterUnknownError" in result["cause"] and "has no recorded request" in result["cause"], result
    assert boto3.client("dynamodb").scan(TableName=rollout.approval_table)["Items"] == []
    assert canary_weight() == 0.0 and audit_actions(rollout)[-1] == ("rollback", "applied")


def test_a_recorded_request_started_again_with_another_requester_is_not_approvable(
    rollout: wf.RolloutWorkflow,
) -> None:
    """The request function recorded Hana's request, but its start was beaten by an execution under that name
    whose input says Ayumi requested it: the record does not match the execution, so no approval is issued."""
    request = rollout_request(steps=[5, 100], approval_steps=[5])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        forged = wf.start(rollout.rollout_arn, request | {"requested_by": wf.APPROVER}, name=request["rollout_id"])
        refused = wf.request_rollout(request)
        assert refused["statusCode"] == 409, refused["body"]
        result = wf.wait(forged, timeout_s=90)

    assert result["status"] == "FAILED" and "is not the request recorded under its name" in result["cause"], result


def test_a_task_token_answered_by_the_requester_does_not_promote(rollout: wf.RolloutWorkflow) -> None:
    """Hana requested the rollout, reads the task token from the execution history and sends SendTaskSuccess."""
    request = rollout_request(steps=[5, 100], approval_steps=[5])
    sfn = boto3.client("stepfunctions")
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(request)
        wf.approval_link(rollout, "approve", execution)
        history = sfn.get_execution_history(executionArn=execution, maxResults=1000)["events"]
        scheduled = [
            json.loads(e["taskScheduledEventDetails"]["parameters"])
            for e in history
            if "taskScheduledEventDetails" in e
        ]
        [token] = [p["Payload"]["task_token"] for p in scheduled if "task_token" in p.get("Payload", {})]
        forged = {"approved": True, "approved_by": wf.APPROVER}
        sfn.send_task_success(taskToken=token, output=json.dumps(forged))
        result = wf.wait(execution, timeout_s=90)

    assert result["status"] == "FAILED" and result["error"] == "RolledBack", result
    assert result["cause"].startswith(UNVERIFIED_ERROR) and "recorded no decision" in result["cause"], result
    assert "Promote" not in wf.state_history(execution) and canary_weight() == 0.0
    records = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    [unverified] = [r for r in records if r.action == UNVERIFIED_ACTION]
    assert (unverified.actor, unverified.outcome) == ("approval", "skipped")
    assert f"rollout {request['rollout_id']} at 5% not promoted" in unverified.reason
    assert audit_actions(rollout)[-1] == ("rollback", "applied")
