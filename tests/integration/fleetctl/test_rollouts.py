"""``fleetctl rollout`` and ``rollback`` drive the real workflows on the emulator (state machines from their ASL,
Lambda tasks running the project's handlers through devtools.lambda_dispatch, SageMaker UpdateEndpoint from the
project's emulator extension), with no task token and no table name on the command line. Rollouts are requested
and decided through the stack's function URLs (a local test double in front of the real handlers), signed as
two IAM users of the emulator: alice requests, bob approves."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from devtools import operator_stack
from devtools import rollout_workflow as wf
from devtools.restored_config import serving_restored
from fleetctl import awsclients
from fleetctl.errors import ExitCode
from tests.conftest import load_event
from tests.integration.fleetctl.conftest import check_schema

ENDPOINT = operator_stack.ENDPOINT
#: Per interval: one interval alone passes the declared minimum sample (200 canary requests).
HEALTHY = {"requests": 300, "errors": 0, "latency_ms": 800, "ttft_ms": 250, "endpoint": ENDPOINT}


def request_file(tmp_path: Path, rollout_id: str, **changes: Any) -> str:
    """The sample rollout request for ``manga-chat-prod`` with test-sized bake, polling and approval times."""
    request: dict[str, Any] = load_event("rollout_validate")["request"]
    del request["requested_by"]  # fleetctl sends the signed caller's
    request |= {
        "rollout_id": rollout_id,
        "endpoint_name": ENDPOINT,
        "steps": [5, 100],
        "bake_seconds": 1,
        "approval_steps": [5, 100],  # a prod endpoint: its promotion always asks a person (rollout_policy)
        "approval": {"timeout_seconds": 120, "heartbeat_seconds": 120},
        "thresholds": {},
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 20},
        "max_extensions": 2,
    } | changes
    path = tmp_path / f"{rollout_id}.json"
    path.write_text(json.dumps(request))
    return str(path)


def approve_when_waiting_at(cli: Any, rollout_id: str, weight: int, timeout_s: float = 60) -> Any:
    """Approve the rollout once it waits for a decision at ``weight`` (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = cli("rollout", "status", rollout_id, "--json").json().get("pending_approval") or {}
        if pending.get("step_weight") == weight:
            return cli("rollout", "approve", rollout_id, "--json")
        time.sleep(0.5)
    raise TimeoutError(f"rollout {rollout_id} did not wait for an approval at {weight}% in {timeout_s} s")


def config_name() -> str:
    return str(boto3.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)["EndpointConfigName"])


@pytest.mark.slow(reason="a whole rollout and its rollback executed on the emulator, with bake times and polling")
def test_approve_promotes_and_rollback_returns_to_the_previous_model(stack, cli, tmp_path, people, sign_in) -> None:
    alice, bob = people["alice"], people["bob"]
    sign_in(alice)
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        started = cli("rollout", "start", request_file(tmp_path, "v7"), "--wait", "--timeout", "150")
        assert started.code == 0, started.err
        # Asked before the first step moves anyone: no step is marked as where the canary is.
        assert "state RequestApproval" in started.out and "steps 5%* → 100%*" in started.out
        assert "... rollout v7:" in started.err  # progress while it waited (plain lines when not a terminal)

        detail = cli("rollout", "status", "v7", "--json")
        check_schema(detail.json(), "rollout_detail")
        assert detail.json()["pending_approval"]["step_weight"] == 5
        assert detail.json()["rollout"]["requested_by"] == alice.arn  # the signer
        assert "fleetctl rollout approve v7" in cli("rollout", "status", "v7").out
        shown = cli("status", "--json").json()
        # No step set yet (the canary's weight is 0) while the first step waits for its approval.
        assert [(r["rollout_id"], r["step_weight"], r["waiting_for_approval"]) for r in shown["rollouts"]] == [
            ("v7", None, True)
        ]

        # The requester may not approve her own rollout: refused with the reason, nothing decided.
        own = cli("rollout", "approve", "v7")
        assert own.code == ExitCode.AWS_ACCESS, own.err
        assert f"{alice.arn} requested rollout v7 and may not decide its approvals" in own.err
        assert cli("rollout", "status", "v7", "--json").json()["pending_approval"]["step_weight"] == 5

        sign_in(bob)
        approved = cli("rollout", "approve", "v7", "--json")
        assert approved.code == 0, approved.err
        check_schema(approved.json(), "rollout_decision")
        assert approved.json()["decided_by"] == bob.arn
        promotion = approve_when_waiting_at(cli, "v7", 100)
        assert promotion.code == 0, promotion.err
        result = wf.wait(approved.json()["rollout"]["execution_arn"], timeout_s=90)

    assert result["status"] == "SUCCEEDED", result
    assert config_name() == f"{ENDPOINT}-v7-final"
    used = [
        item
        for item in boto3.client("dynamodb").scan(TableName=stack.workflow.approval_table)["Items"]
        if "task_token" in item  # not the request records written beside the approvals
    ]
    assert [(u["decision"]["S"], u["decided_by"]["S"]) for u in used] == [("approve", bob.arn)] * 2
    # One audit record per decision, with who decided.
    decisions = cli("why", "--since", "30d", "--json", "--actor", "approval").json()["entries"]
    assert sorted(e["action"] for e in decisions) == ["approve", "approve"], decisions
    assert all(f"by {bob.arn}" in e["reason"] for e in decisions), decisions
    again = cli("rollout", "approve", "v7")
    assert again.code == ExitCode.CONFLICT and "is SUCCEEDED: nothing waits for a decision" in again.err

    rolled_back = cli("rollback", "--reason", "TTFT regression seen by support", "--json", "--timeout", "150")

    assert rolled_back.code == 0, rolled_back.err
    check_schema(rolled_back.json(), "rollback")
    assert rolled_back.json()["status"] == "SUCCEEDED"
    serving_restored(ENDPOINT, f"{ENDPOINT}-v6-config")  # v6's config, as the rollback's copy of it
    trail = cli("why", "--since", "30d", "--json", "--actor", "rollback").json()["entries"]
    assert any("TTFT regression seen by support" in e["reason"] for e in trail), trail


def test_reject_rolls_the_rollout_back_with_the_reason(stack, cli, tmp_path, people, sign_in) -> None:
    sign_in(people["alice"])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        assert cli("rollout", "start", request_file(tmp_path, "v8"), "--wait", "--timeout", "150").code == 0
        sign_in(people["bob"])
        rejected = cli("rollout", "reject", "v8", "--reason", "p95 TTFT looks worse")
        assert rejected.code == 0, rejected.err
        assert "rejected (the rollout rolls back): rollout v8 on manga-chat-prod at 5%" in rejected.out
        result = wf.wait(_execution(stack, "v8"), timeout_s=60)

    assert result["status"] == "FAILED" and result["cause"].startswith("RolloutRejected"), result
    serving_restored(ENDPOINT, f"{ENDPOINT}-v6-config")  # v6's config, as the rollback's copy of it
    # The reason travels in SendTaskFailure's cause, which the emulator drops ("RolloutRejected: null"); the
    # unit test of the approval gate's decide() checks it is sent.
    [used] = [
        item
        for item in boto3.client("dynamodb").scan(TableName=stack.workflow.approval_table)["Items"]
        if "task_token" in item  # not the request records written beside the approvals
    ]
    assert (used["decision"]["S"], used["decided_by"]["S"]) == ("reject", people["bob"].arn)
    ended = cli("rollout", "status", "v8")
    assert "FAILED" in ended.out


def _execution(stack: operator_stack.OperatorStack, rollout_id: str) -> str:
    return stack.workflow.rollout_arn.replace(":stateMachine:", ":execution:") + f":{rollout_id}"


@pytest.mark.slow(reason="a rollout executed to its approval, then aborted and the endpoint updated back")
def deny_like_the_approval_scp(approval_table: str) -> None:
    """Test double of the approval's service control policy (docs/approval-permissions.md), which the emulator cannot
    evaluate: fleetctl's clients get AWS's AccessDeniedException for rollout histories and the approval table."""

    def deny(model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        json_api = model.service_model.protocol == "json"  # DynamoDB: the table is in the request's JSON body
        table = json.loads(params.get("body") or "{}").get("TableName") if json_api else None
        if model.name != "GetExecutionHistory" and table != approval_table:
            return None
        message = f"User is not authorized to perform: {model.name} with an explicit deny in a service control policy"
        error = {"Error": {"Code": "AccessDeniedException", "Message": message}, "ResponseMetadata": {}}
        # botocore-stubs types headers as HTTPHeaders; botocore takes any mapping (it keeps a HeadersDict of it).
        return AWSResponse("https://denied.invalid", 400, {}, None), error  # type: ignore[arg-type]

    awsclients.reset()  # clients take the session's handlers when they are built
    awsclients.session().events.register("before-call", deny)


def test_abort_stops_a_rollout_in_flight_and_returns_the_endpoint(stack, cli, tmp_path, people, sign_in) -> None:
    sign_in(people["alice"])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        assert cli("rollout", "start", request_file(tmp_path, "v9"), "--wait", "--timeout", "150").code == 0
        # Under the approval SCP, people read neither rollout histories nor the approval table: the commands still
        # answer with what they can read, and say what they could not.
        deny_like_the_approval_scp(stack.workflow.approval_table)
        detail = cli("rollout", "status", "v9", "--json")
        assert detail.code == 0, detail.err
        check_schema(detail.json(), "rollout_detail")
        assert detail.json()["rollout"]["status"] == "RUNNING" and detail.json()["rollout"]["state"] is None
        assert "access denied on GetExecutionHistory" in detail.json()["rollout"]["history_unreadable"]
        assert detail.json()["approval_unreadable"].startswith("access denied on Scan")
        assert "state and step unknown: access denied on GetExecutionHistory" in cli("rollout", "status", "v9").out
        shown = cli("status", "--json")
        assert shown.code == 0, shown.err
        assert [(r["rollout_id"], r["history_unreadable"] is not None) for r in shown.json()["rollouts"]] == [
            ("v9", True)
        ]
        awsclients.reset()  # the SCP double goes with fleetctl's session
        aborted = cli("rollout", "abort", "v9", "--reason", "wrong adapter shipped", "--timeout", "150")

    assert aborted.code == 0, aborted.err
    assert "abort of rollout v9 on manga-chat-prod" in aborted.out and "SUCCEEDED" in aborted.out
    assert boto3.client("stepfunctions").describe_execution(executionArn=_execution(stack, "v9"))["status"] == "ABORTED"
    serving_restored(ENDPOINT, f"{ENDPOINT}-v6-config")  # v6's config, as the rollback's copy of it
    not_running = cli("rollout", "abort", "v9", "--reason", "again")
    assert not_running.code == ExitCode.CONFLICT and "there is nothing to abort" in not_running.err


def test_bad_rollout_input_is_refused_before_anything_starts(stack, cli, tmp_path) -> None:
    bad = cli("rollout", "start", request_file(tmp_path, "v10", canary={"instance_type": "g5"}))
    assert bad.code == ExitCode.USAGE
    assert "the rollout request is invalid" in bad.err and "canary.instance_type" in bad.err
    steps = cli("rollout", "start", request_file(tmp_path, "v11", steps=[50, 25]))
    assert steps.code == ExitCode.USAGE and "steps must strictly increase, got [50, 25]" in steps.err
    assert boto3.client("stepfunctions").list_executions(stateMachineArn=stack.workflow.rollout_arn)["executions"] == []
    missing = cli("rollout", "start", str(tmp_path / "nope.json"))
    assert missing.code == ExitCode.USAGE and "cannot read" in missing.err
    unknown = cli("rollout", "approve", "v404")
    assert unknown.code == ExitCode.NOT_FOUND and "no rollout 'v404'" in unknown.err
    nowhere = cli("rollback", "manga-chat-staging", "--reason", "x")
    assert nowhere.code == ExitCode.NOT_FOUND and "endpoint 'manga-chat-staging' does not exist" in nowhere.err
    listing = cli("rollout", "status", "--json")
    check_schema(listing.json(), "rollout_list")
    assert listing.json()["running"] == []


def test_requests_go_through_the_signed_url_only_and_repeat_idempotently(stack, cli, tmp_path, people, sign_in) -> None:
    alice = people["alice"]
    sign_in(alice)
    path = request_file(tmp_path, "v12", dry_run=True)
    first = cli("rollout", "start", path, "--json")
    assert first.code == 0, first.err
    # The same request again is the same execution; another request under the same id is refused.
    again = cli("rollout", "start", path, "--json")
    assert again.code == 0 and again.json()["execution_arn"] == first.json()["execution_arn"], again.err
    other = cli("rollout", "start", request_file(tmp_path, "v12", dry_run=True, bake_seconds=2))
    assert other.code == ExitCode.CONFLICT and "was requested before with another request" in other.err
    # requested_by is the signer's: a request naming someone is refused before it leaves, and by the function.
    forged = json.loads(Path(path).read_text()) | {"requested_by": people["bob"].arn}
    Path(path).write_text(json.dumps(forged))
    named = cli("rollout", "start", path)
    assert named.code == ExitCode.USAGE and "taken from your signed AWS identity" in named.err
    url = stack.outputs["RolloutRequestUrl"]
    refused = _post(url, forged)
    assert refused[0] == 400 and "requested_by may not be set" in refused[1]["message"]
    # An unsigned request never reaches the function (the function URL's IAM auth answers 403).
    assert _post(url, forged, signed=False) == (403, {"Message": "Forbidden"})
    assert _post(stack.outputs["ApprovalEndpointUrl"], {"rollout_id": "v12"}, signed=False)[0] == 403
    executions = boto3.client("stepfunctions").list_executions(stateMachineArn=stack.workflow.rollout_arn)["executions"]
    assert [e["name"] for e in executions] == ["v12"]


def _post(url: str, body: dict[str, Any], signed: bool = True) -> tuple[int, Any]:
    """POST JSON to a function URL, signed as the current caller (fleetctl's own signing) or not at all."""
    import urllib.error
    import urllib.request

    from fleetctl import signed_http

    data = json.dumps(body).encode()
    request = (
        signed_http._signed(url, data)
        if signed
        else urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
