"""The canary rollout executed from ``statemachines/canary_rollout.asl.json`` on the moto server.

Emulated by this project (see ``conftest.py``): SageMaker UpdateEndpoint and its Updating -> InService
transitions, variant weight 0, CloudWatch p95, Lambda tasks running the real handlers. The approval
endpoint is driven through its real handler with the event an IAM-signed function URL request gives.
"""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.restored_config import serving_restored
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.lease import EndpointLease
from fleetops.rollout.approval import new_approval_id
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.versions import Release
from tests.integration.workflows.conftest import HEALTHY, rollout_request


def endpoint() -> dict[str, Any]:
    return dict(boto3.client("sagemaker").describe_endpoint(EndpointName=wf.ENDPOINT))


def variants() -> dict[str, float]:
    return {v["VariantName"]: v["CurrentWeight"] for v in endpoint()["ProductionVariants"]}


def pointer() -> dict[str, Any]:
    value = boto3.client("ssm").get_parameter(Name=f"{wf.POINTER_PREFIX}/{wf.ENDPOINT}")["Parameter"]["Value"]
    return dict(json.loads(value))


def approval_items(rollout: wf.RolloutWorkflow) -> list[dict[str, Any]]:
    """The approval table's approvals, without the request records (``rollout#<name>``) written beside them."""
    items = boto3.client("dynamodb").scan(TableName=rollout.approval_table)["Items"]
    return [item for item in items if "task_token" in item]


def pointer_release(value: dict[str, Any]) -> Release:
    return Pointer.model_validate(value).release()


def test_all_steps_pass_with_approvals_and_the_new_model_serves_100_percent(rollout: wf.RolloutWorkflow) -> None:
    request = rollout_request(steps=[5, 25, 50, 75, 100], approval_steps=[50, 100])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(request)
        for _ in (50, 100):
            link = wf.approval_link(rollout, "approve", execution)
            # The person who requested the rollout may not approve it; another person may.
            own = wf.submit(link, caller=wf.REQUESTER)
            assert own["statusCode"] == 403 and "may not decide its approvals" in own["body"], own["body"]
            page = wf.submit(link)
            assert page["statusCode"] == 200, page["body"]
        result = wf.wait(execution, timeout_s=90)

    assert result["status"] == "SUCCEEDED", result
    described = endpoint()
    assert described["EndpointConfigName"] == "manga-chat-llama-q4-v7-final"
    [only] = described["ProductionVariants"]
    config = boto3.client("sagemaker").describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
    assert (
        only["VariantName"] == "primary"
        and config["ProductionVariants"][0]["ModelName"] == "manga-chat-llama-q4-v7-final-model"
    )
    promoted = boto3.client("sagemaker").describe_model(ModelName="manga-chat-llama-q4-v7-final-model")
    assert promoted["PrimaryContainer"]["Environment"]["VARIANT_NAME"] == "primary"
    assert pointer()["version"] == "v7" and pointer()["previous_endpoint_config_name"] == "manga-chat-v6-config"
    # The previous config is kept for rollback.
    boto3.client("sagemaker").describe_endpoint_config(EndpointConfigName="manga-chat-v6-config")
    history = wf.state_history(execution)
    assert history.count("SetWeights") == 4 and history.count("RequestApproval") == 2  # 100 % promotes instead
    [item] = boto3.client("dynamodb").scan(TableName=rollout.registry_table)["Items"]
    assert item["endpoint_config_name"]["S"] == "manga-chat-llama-q4-v7-final"
    assert (item["version"]["S"], item["base_version"]["S"]) == (pointer_release(pointer()).release_key(), "v7")
    records = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    actions = [(r.action, r.outcome) for r in records]
    assert actions == [
        ("rollout-start", "applied"),
        ("approve", "applied"),
        ("approve", "applied"),
        ("rollout-promote", "applied"),
    ]
    # One audit record per decision: who decided, at which step, for whose request.
    decisions = [(r.actor, r.after) for r in records if r.action == "approve"]
    assert [(actor, after and after["step_weight"], after and after["decided_by"]) for actor, after in decisions] == [
        ("approval", 50, wf.APPROVER),
        ("approval", 100, wf.APPROVER),
    ]
    assert all(after and after["requested_by"] == wf.REQUESTER for _, after in decisions)
    assert "Item" not in boto3.client("dynamodb").get_item(
        TableName=rollout.lease_table, Key={"endpoint_name": {"S": wf.ENDPOINT}}
    )


def assert_rolled_back(rollout: wf.RolloutWorkflow, result: dict[str, Any], error: str) -> None:
    """The rollout failed with RolledBack, the endpoint serves the old config (the rollback's copy of it, with the
    live instance counts), pointer and lease are clean."""
    assert result["status"] == "FAILED", result
    assert result["error"] == "RolledBack" and result["cause"].startswith(error), result
    described = serving_restored(wf.ENDPOINT, "manga-chat-v6-config")
    assert described["EndpointStatus"] == "InService"
    assert [v["VariantName"] for v in described["ProductionVariants"]] == ["primary"]
    assert pointer()["endpoint_config_name"] == "manga-chat-v6-config"
    lease = boto3.client("dynamodb").get_item(TableName=rollout.lease_table, Key={"endpoint_name": {"S": wf.ENDPOINT}})
    assert "Item" not in lease
    records = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    assert [(r.action, r.outcome) for r in records][-1] == ("rollback", "applied")
    assert error in records[-1].reason


def test_reject_at_an_approval_rolls_back_to_the_old_model(rollout: wf.RolloutWorkflow) -> None:
    request = rollout_request(approval_steps=[25])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(request)
        page = wf.submit(wf.approval_link(rollout, "reject", execution), caller="arn:aws:iam::123456789012:user/kenji")
        result = wf.wait(execution, timeout_s=60)

    assert page["statusCode"] == 200 and "rejected by arn:aws:iam::123456789012:user/kenji" in page["body"]
    assert_rolled_back(rollout, result, "RolloutRejected")
    # Who decided is recorded with the (now used) approval.
    [used] = approval_items(rollout)
    assert (used["status"]["S"], used["decision"]["S"]) == ("used", "reject")
    assert used["decided_by"]["S"] == "arn:aws:iam::123456789012:user/kenji"
    assert "Promote" not in wf.state_history(execution)


def test_analysis_failing_at_25_percent_rolls_back_without_a_human(rollout: wf.RolloutWorkflow) -> None:
    # A 3-second bake: the traffic thread reads the canary's weight before it publishes, so the first interval
    # in a step's window may still be the step before's. With a 1-second bake, on a fast machine that interval
    # was the whole window once (300 requests, no errors: a pass at 25 %).
    request = rollout_request(approval_steps=[100], bake_seconds=3)

    def canary(weight: float) -> dict[str, Any]:  # a bug that shows only under more load
        return HEALTHY | {"errors": 60} if weight >= 25 else HEALTHY

    with wf.traffic(canary=canary, primary=HEALTHY):
        execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
        result = wf.wait(execution, timeout_s=60)

    assert_rolled_back(rollout, result, "CanaryAnalysisFailed")
    assert "error rate" in result["cause"]
    history = wf.state_history(execution)
    # Two steps (5 %, 25 %) were set; an inconclusive bake on a busy machine may add an Analyse.
    assert history.count("SetWeights") == 2 and "RequestApproval" not in history


@pytest.mark.parametrize(("tightened", "status"), [(None, "SUCCEEDED"), (350, "FAILED")])
def test_a_request_that_tightens_the_ttft_check_fails_a_canary_the_declared_limit_allows(
    rollout: wf.RolloutWorkflow, tightened: int | None, status: str
) -> None:
    # The declared p95 TTFT SLO (canary_checks.yaml: 500 ms), read as a percentile from CloudWatch; the request's
    # max_ttft_p95_ms may only tighten it, for this rollout. Both variants' p95 is 420 ms (300 ms x 1.4), so no
    # check against the primary speaks. 350 ms, well under 420: 30 % of its requests are slower, not 5 %, beyond
    # chance within the bake however few intervals a busy machine publishes (at 400 ms, 15 % of them: 1,200 requests
    # were not enough once, p 0.00061). (A relative limit's tightening shows only on a regression beyond chance,
    # thousands of requests: the unit tests of the analysis cover it.)
    request = rollout_request(thresholds={"max_ttft_p95_ms": tightened} if tightened else {})
    slower = HEALTHY | {"ttft_ms": 300}
    with wf.traffic(canary=slower, primary=slower):
        execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
        result = wf.wait(execution, timeout_s=60)

    if status == "FAILED":
        assert_rolled_back(rollout, result, "CanaryAnalysisFailed")
        assert "absolute SLO: p95 TTFT 420 ms above 350 ms" in result["cause"], result["cause"]
        assert "relative to baseline" not in result["cause"], result["cause"]
    else:
        assert result["status"] == "SUCCEEDED", result


def test_approval_timeout_rolls_back(rollout: wf.RolloutWorkflow) -> None:
    request = rollout_request(approval_steps=[5], approval={"timeout_seconds": 3, "heartbeat_seconds": 2})
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(request)
        link = wf.approval_link(rollout, "approve", execution)
        [stored] = approval_items(rollout)
        result = wf.wait(execution, timeout_s=60)

    # The link expires when Step Functions stops waiting: the heartbeat (2 s), sooner than the timeout (3 s).
    entered = next(
        e["timestamp"]
        for e in boto3.client("stepfunctions").get_execution_history(executionArn=execution)["events"]
        if e.get("stateEnteredEventDetails", {}).get("name") == "RequestApproval"
    )
    assert abs(int(stored["expires_at"]["N"]) - (entered.timestamp() + 2)) <= 1  # whole seconds in the table

    assert result["cause"].startswith(("States.HeartbeatTimeout", "States.Timeout")), result
    assert_rolled_back(rollout, result, "States.")
    # The link of a rollout that moved on is refused, not silently accepted.
    late = wf.submit(link)
    assert late["statusCode"] == 410, late["body"]


def test_in_service_timeout_rolls_back(rollout: wf.RolloutWorkflow, monkeypatch: pytest.MonkeyPatch) -> None:
    # The canary's config takes far longer to deploy (10 s) than the rollout waits for it (4 polls 1 s apart),
    # however slowly a busy machine runs the workflow's Lambda calls between the polls (with 4 s for every update
    # and 2 polls, a run beside the container tests once saw it in service and set the weights). The rollback sits
    # out the rest of that update, within its own 3 x 4 polls, then puts the old config back in the usual 0.5 s.
    request = rollout_request(in_service={"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 4})
    canary_config = f"{request['endpoint_name']}-{request['rollout_id']}-canary"
    monkeypatch.setitem(emulated_sagemaker.behaviour.update_seconds_by_config, canary_config, 10)
    execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
    result = wf.wait(execution, timeout_s=60)

    assert_rolled_back(rollout, result, "InServiceTimeout")
    assert "SetWeights" not in wf.state_history(execution)


def test_bad_input_fails_fast_and_touches_nothing(rollout: wf.RolloutWorkflow) -> None:
    request = rollout_request(canary={"instance_type": "g5.2xlarge"}, approval={"timeout_seconds": 0})
    request["model"] = {k: v for k, v in request["model"].items() if k != "image_uri"}
    execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
    result = wf.wait(execution, timeout_s=30)

    assert result["status"] == "FAILED" and result["error"] == "RolloutInputError"
    # What the operator reads: every problem at once.
    for problem in ("model.image_uri: Field required", "canary.instance_type", "approval.timeout_seconds"):
        assert problem in result["cause"], result["cause"]
    assert wf.state_history(execution) == ["Validate", "Refused"]
    sagemaker = boto3.client("sagemaker")
    assert [m["ModelName"] for m in sagemaker.list_models()["Models"]] == ["manga-chat-v6-model"]
    assert [c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]] == [
        "manga-chat-v6-config"
    ]
    assert boto3.client("dynamodb").scan(TableName=rollout.lease_table)["Items"] == []
    assert AuditTable(rollout.audit_table).list(wf.ENDPOINT) == []


def test_a_dry_run_plans_and_audits_but_changes_nothing(rollout: wf.RolloutWorkflow) -> None:
    request = rollout_request(dry_run=True)
    result = wf.wait(wf.start(rollout.rollout_arn, request, name=request["rollout_id"]), timeout_s=30)

    assert result["status"] == "SUCCEEDED", result
    [record] = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    assert (record.action, record.outcome, record.dry_run) == ("rollout-plan", "planned", True)
    assert [m["ModelName"] for m in boto3.client("sagemaker").list_models()["Models"]] == ["manga-chat-v6-model"]
    assert endpoint()["EndpointConfigName"] == "manga-chat-v6-config"


def test_an_engaged_kill_switch_refuses_to_start(rollout: wf.RolloutWorkflow) -> None:
    parameter = rollout.environment["KILL_SWITCH_PARAMETER"]
    boto3.client("ssm").put_parameter(Name=parameter, Value="engaged", Type="String", Overwrite=True)
    request = rollout_request()
    result = wf.wait(wf.start(rollout.rollout_arn, request, name=request["rollout_id"]), timeout_s=30)

    assert (result["status"], result["error"]) == ("FAILED", "KillSwitchEngagedError"), result
    assert "release it to start a rollout" in result["cause"]
    assert endpoint()["EndpointConfigName"] == "manga-chat-v6-config"


def test_a_second_writer_is_refused_while_the_lease_is_held(rollout: wf.RolloutWorkflow) -> None:
    assert EndpointLease(rollout.lease_table).acquire(wf.ENDPOINT, "alarm_responder/x", 600)
    request = rollout_request()
    result = wf.wait(wf.start(rollout.rollout_arn, request, name=request["rollout_id"]), timeout_s=30)

    assert result["status"] == "FAILED" and result["error"] == "EndpointBusy", result
    assert endpoint()["EndpointConfigName"] == "manga-chat-v6-config"


@pytest.mark.parametrize("same_input", [True, False])
def test_execution_names_are_idempotent_per_rollout_id(
    rollout: wf.RolloutWorkflow, same_input: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 30)  # keep the first run busy
    request = rollout_request()
    first = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
    try:
        again = rollout_request() if same_input else rollout_request(bake_seconds=2)
        if same_input:  # Step Functions answers the same execution for the same name and input
            assert wf.start(rollout.rollout_arn, again, name=request["rollout_id"]) == first
        else:
            with pytest.raises(boto3.client("stepfunctions").exceptions.ExecutionAlreadyExists):
                wf.start(rollout.rollout_arn, again, name=request["rollout_id"])
    finally:
        # moto can only stop an execution whose interpreter thread has started: wait for its first state.
        sfn = boto3.client("stepfunctions")
        deadline = time.monotonic() + 30
        while len(sfn.get_execution_history(executionArn=first)["events"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        sfn.stop_execution(executionArn=first)


def test_approval_links_are_single_use_cannot_be_forged_and_never_logged(
    rollout: wf.RolloutWorkflow, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    request = rollout_request(approval_steps=[5], steps=[5, 100])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(request)
        link = wf.approval_link(rollout, "approve", execution)
        [stored] = approval_items(rollout)
        token = stored["task_token"]["S"]

        # A mail scanner (or the approver) opening the link changes nothing: it only shows a form.
        page = wf.open_link(link)
        assert page["statusCode"] == 200 and "<form method='post'>" in page["body"]
        assert wf.open_link(link)["statusCode"] == 200
        # A request without an IAM identity is refused before anything is consumed.
        assert wf.submit(link, caller=None)["statusCode"] == 403
        # Forged ids: well-formed but unknown, and malformed.
        forged = link.replace(link.split("id=")[1].split("&")[0], new_approval_id())
        assert wf.submit(forged)["statusCode"] == 404
        assert wf.submit(link.replace("id=", "id=x"))["statusCode"] == 400

        assert wf.submit(link)["statusCode"] == 200
        again = wf.submit(link, caller="arn:aws:iam::123456789012:user/mallory")
        result = wf.wait(execution, timeout_s=60)

    assert again["statusCode"] == 409 and "already used" in again["body"] and "ayumi" in again["body"]
    assert result["status"] == "SUCCEEDED", result
    # The link carries the approval id, never the token; neither the token nor the id reaches the logs.
    assert token not in link
    captured = capsys.readouterr()
    logged = captured.out + captured.err + caplog.text
    assert "approval decided" in logged
    assert token not in logged and link.split("id=")[1].split("&")[0] not in logged


def models() -> list[str]:
    return sorted(m["ModelName"] for m in boto3.client("sagemaker").list_models()["Models"])


def assert_refused_untouched(
    rollout: wf.RolloutWorkflow, execution: str, result: dict[str, Any], endpoint: str
) -> None:
    """Validate refused the request: nothing was created, leased or audited."""
    assert (result["status"], result["error"]) == ("FAILED", "RolloutInputError"), result
    assert wf.state_history(execution) == ["Validate", "Refused"]
    sagemaker = boto3.client("sagemaker")
    assert models() == sorted({"manga-chat-v6-model", f"{endpoint}-v6-model"})
    assert sagemaker.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"] == f"{endpoint}-v6-config"
    assert boto3.client("dynamodb").scan(TableName=rollout.lease_table)["Items"] == []
    assert AuditTable(rollout.audit_table).list(endpoint) == []


def test_a_prod_rollout_without_the_promotion_approval_is_refused_and_changes_nothing(
    rollout: wf.RolloutWorkflow,
) -> None:
    # The workflows' fleet.yaml (devtools/workflow_fleet.yaml) lists manga-chat-prod as prod: a person must
    # approve its promotion, and no request can take that away.
    prod = "manga-chat-prod"
    wf.create_endpoint(prod)
    request = rollout_request(endpoint_name=prod, approval_steps=[])
    execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
    result = wf.wait(execution, timeout_s=30)

    assert "approval_steps: steps [100] must ask a person on a prod endpoint" in result["cause"], result["cause"]
    assert_refused_untouched(rollout, execution, result, prod)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"thresholds": {"min_requests": 20}}, "thresholds.min_requests: 20 is looser than check 'requests'"),
        ({"bake_seconds": 30 * 86400}, "bake_seconds: step 5 bakes 2592000 s, above the limit of 600 s"),
        ({"endpoint_name": "manga-chat-staging"}, "'manga-chat-staging' is not an endpoint of fleet.yaml"),
    ],
)
def test_a_request_that_loosens_a_check_bakes_for_a_month_or_names_an_unlisted_endpoint_is_refused(
    rollout: wf.RolloutWorkflow, changes: dict[str, Any], reason: str
) -> None:
    request = rollout_request(**changes)
    execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
    result = wf.wait(execution, timeout_s=30)

    assert reason in result["cause"], result["cause"]
    assert_refused_untouched(rollout, execution, result, wf.ENDPOINT)


def test_the_models_a_rollout_creates_run_network_isolated_with_the_stack_role(rollout: wf.RolloutWorkflow) -> None:
    request = rollout_request(steps=[100])
    request["model"] = {k: v for k, v in request["model"].items() if k != "execution_role_arn"}  # the stack's
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        result = wf.wait(wf.start(rollout.rollout_arn, request, name=request["rollout_id"]), timeout_s=60)

    assert result["status"] == "SUCCEEDED", result
    sent = [
        json.loads(e["taskScheduledEventDetails"]["parameters"])
        for e in boto3.client("stepfunctions").get_execution_history(executionArn=result["executionArn"])["events"]
        if e["type"] == "TaskScheduled" and e["taskScheduledEventDetails"]["resource"] == "createModel"
    ]
    assert len(sent) == 2, sent
    assert all(p["EnableNetworkIsolation"] is True and p["ExecutionRoleArn"] == wf.ROLE for p in sent), sent
