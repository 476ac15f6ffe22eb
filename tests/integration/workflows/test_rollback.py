"""The rollback executed from ``statemachines/rollback.asl.json`` on the moto server, on its own.

Emulated by this project (see ``conftest.py``): SageMaker UpdateEndpoint and its Updating -> InService
transitions, variant weight 0, Lambda tasks running the real handlers. The rollout's own use of the
rollback is covered in ``test_canary_rollout.py``; fencing and the kill switch in ``test_rollout_guards.py``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.lambda_dispatch import load_handler_module
from devtools.restored_config import serving_restored
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.lease import EndpointLease
from fleetops.model_contract import ModelContract
from tests.integration.workflows.conftest import HEALTHY, rollout_request

OLD_CONFIG = "manga-chat-v6-config"
NEW_CONFIG = "manga-chat-v7-canary"
PROMOTED_CONFIG = "manga-chat-v7-final"
POINTER = f"{wf.POINTER_PREFIX}/{wf.ENDPOINT}"
#: What the alarm responder sends on a canary alarm (fleetops.remediation.rollback_workflow): no target, abort_only.
RESPONDER_ROLLBACK = {
    "endpoint_name": wf.ENDPOINT,
    "rollback_id": "oom-canary-1",
    "canary_variant_name": "canary",
    "abort_only": True,
    "reason": "OomCaught on the canary",
    "requested_by": "alarm_responder",
    "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 10},
}


def mid_rollout(canary_weight: float = 25.0) -> None:
    """The endpoint as a rollout leaves it: primary + canary serving v7 at ``canary_weight`` percent."""
    sagemaker = boto3.client("sagemaker")
    sagemaker.create_model(ModelName="manga-chat-v7-model", ExecutionRoleArn=wf.ROLE, PrimaryContainer={"Image": "v7"})
    variants: Any = [
        {
            "VariantName": wf.PRIMARY,
            "ModelName": "manga-chat-v6-model",
            "InstanceType": wf.INSTANCE_TYPE,
            "InitialInstanceCount": 2,
            "InitialVariantWeight": 100.0 - canary_weight,
        },
        {
            "VariantName": "canary",
            "ModelName": "manga-chat-v7-model",
            "InstanceType": wf.INSTANCE_TYPE,
            "InitialInstanceCount": 1,
            "InitialVariantWeight": canary_weight,
        },
    ]
    sagemaker.create_endpoint_config(EndpointConfigName=NEW_CONFIG, ProductionVariants=variants)
    sagemaker.update_endpoint(EndpointName=wf.ENDPOINT, EndpointConfigName=NEW_CONFIG)
    wait_in_service()


def wait_in_service() -> dict[str, Any]:
    sagemaker = boto3.client("sagemaker")
    for _ in range(100):
        described = sagemaker.describe_endpoint(EndpointName=wf.ENDPOINT)
        if described["EndpointStatus"] == "InService":
            return dict(described)
        time.sleep(0.1)
    raise TimeoutError("endpoint never settled")


def back_on_old_config() -> dict[str, Any]:
    """The endpoint, settled on v6's config: the rollback's copy of it (live instance counts), or that config."""
    wait_in_service()
    return serving_restored(wf.ENDPOINT, OLD_CONFIG)


def rollback_input(**changes: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "endpoint_name": wf.ENDPOINT,
        "rollback_id": "ops-1",
        "canary_variant_name": "canary",
        "reason": "p95 TTFT alarm on the canary",
        "requested_by": "arn:aws:iam::123456789012:user/ayumi",
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 10},
    }
    return request | changes


def live_pointer() -> dict[str, Any]:
    """The model pointer before the rollout: v6 serves; the rollback derives its target from it."""
    pointer = {
        "model": "manga-llama",
        "version": "v6",
        "sagemaker_model": "manga-chat-v6-model",
        "endpoint_config_name": OLD_CONFIG,
        "rollout_id": "v6",
        "previous_endpoint_config_name": "manga-chat-v5-config",
        "previous_version": "v5",
    }
    boto3.client("ssm").put_parameter(Name=POINTER, Value=json.dumps(pointer), Type="String", Overwrite=True)
    return pointer


def test_rollback_returns_a_rollout_in_flight_to_the_pointers_config_and_aborting_again_is_safe(
    rollout: wf.RolloutWorkflow,
) -> None:
    """No target in the request: the endpoint is on neither the pointer's config nor its previous one, so a
    rollout is in flight and the rollback returns to the config the pointer names. A second abort finds nothing
    to do (a second plain rollback would undo the last promotion, as ``fleetctl rollback`` asks)."""
    live_pointer()
    mid_rollout()

    first = wf.wait(wf.start(rollout.rollback_arn, rollback_input(), name="ops-1"), timeout_s=60)
    again = rollback_input(rollback_id="ops-2", abort_only=True)
    second = wf.wait(wf.start(rollout.rollback_arn, again, name="ops-2"), timeout_s=60)

    assert first["status"] == "SUCCEEDED", first
    assert second["status"] == "SUCCEEDED", second
    history = wf.state_history(first["executionArn"])
    # Canary weight to 0 first (fast), then the previous config back.
    assert history.index("ZeroCanary") < history.index("RestoreConfig")
    second_history = wf.state_history(second["executionArn"])
    assert "ZeroCanary" not in second_history and "RestoreConfig" not in second_history  # nothing left to do
    described = back_on_old_config()
    assert [v["VariantName"] for v in described["ProductionVariants"]] == [wf.PRIMARY]
    records = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    assert [(r.actor, r.action, r.outcome) for r in records] == [("rollback", "rollback", "applied")] * 2
    assert records[0].reason == "p95 TTFT alarm on the canary"
    assert records[0].trigger == "arn:aws:iam::123456789012:user/ayumi"
    subjects = [n["Subject"] for n in wf.notifications(rollout, wait_s=2)]
    assert subjects.count("Rolled back manga-chat") >= 1
    assert boto3.client("dynamodb").scan(TableName=rollout.lease_table)["Items"] == []


def test_a_rollback_during_a_scale_out_restores_the_old_config_with_the_instances_serving_now(
    rollout: wf.RolloutWorkflow,
) -> None:
    """An alarm scaled the primary out from v6's 2 instances to 6 in an incident (and raised its MinCapacity), then
    a canary alarm rolls back: the endpoint goes back to v6's config as a copy with the 6 instances, not v6's 2,
    and the raise stays. The copy is v6's config (model, variants, weights, fields, tags) under a name that says so.
    """
    live_pointer()
    mid_rollout()
    sagemaker = boto3.client("sagemaker")
    old_arn = sagemaker.describe_endpoint_config(EndpointConfigName=OLD_CONFIG)["EndpointConfigArn"]
    sagemaker.add_tags(ResourceArn=old_arn, Tags=[{"Key": "team", "Value": "manga-assistant"}])
    sagemaker.update_endpoint_weights_and_capacities(
        EndpointName=wf.ENDPOINT, DesiredWeightsAndCapacities=[{"VariantName": wf.PRIMARY, "DesiredInstanceCount": 6}]
    )
    wait_in_service()
    autoscaling = boto3.client("application-autoscaling")
    primary = f"endpoint/{wf.ENDPOINT}/variant/{wf.PRIMARY}"
    dimension: Final = "sagemaker:variant:DesiredInstanceCount"
    autoscaling.register_scalable_target(
        ServiceNamespace="sagemaker", ResourceId=primary, ScalableDimension=dimension, MinCapacity=6, MaxCapacity=8
    )

    result = wf.wait(wf.start(rollout.rollback_arn, RESPONDER_ROLLBACK, name="oom-canary-1"), timeout_s=60)

    assert result["status"] == "SUCCEEDED", result
    history = wf.state_history(result["executionArn"])
    assert history.index("ZeroCanary") < history.index("CreateRestoreConfig") < history.index("RestoreConfig")
    described = back_on_old_config()  # the copy: v6's model, variant names, weights and tags
    copy = described["EndpointConfigName"]
    assert copy.startswith(f"{OLD_CONFIG}-restore-"), copy
    [variant] = sagemaker.describe_endpoint_config(EndpointConfigName=copy)["ProductionVariants"]
    assert (variant["ModelName"], variant["InitialInstanceCount"]) == ("manga-chat-v6-model", 6)
    assert variant["InferenceAmiVersion"] == wf.hosting().variant_fields()["InferenceAmiVersion"]
    [serving] = described["ProductionVariants"]
    assert (serving["VariantName"], serving["CurrentInstanceCount"]) == (wf.PRIMARY, 6)
    [target] = autoscaling.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[primary])[
        "ScalableTargets"
    ]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (6, 8)  # the responder's raise is not released
    notes = [n for n in wf.notifications(rollout, wait_s=2) if n["Subject"] == "Rolled back manga-chat"]
    assert notes and f"serves endpoint config {OLD_CONFIG} again, on config {copy}" in notes[0]["Message"], notes


def test_operator_rollback_without_a_target_uses_the_model_pointer(rollout: wf.RolloutWorkflow) -> None:
    mid_rollout(canary_weight=100.0)  # as if promoted: the new config serves everything
    pointer = {
        "model": "manga-llama",
        "version": "v7",
        "sagemaker_model": "manga-chat-v7-model",
        "endpoint_config_name": NEW_CONFIG,
        "rollout_id": "v7",
        "previous_endpoint_config_name": OLD_CONFIG,
        "previous_version": "v6",
    }
    boto3.client("ssm").put_parameter(Name=POINTER, Value=json.dumps(pointer), Type="String", Overwrite=True)
    request = {
        "endpoint_name": wf.ENDPOINT,
        "rollback_id": "ops-3",
        "canary_variant_name": "canary",
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 10},
    }

    result = wf.wait(wf.start(rollout.rollback_arn, request, name="ops-3"), timeout_s=60)

    assert result["status"] == "SUCCEEDED", result
    back_on_old_config()
    restored = json.loads(boto3.client("ssm").get_parameter(Name=POINTER)["Parameter"]["Value"])
    assert (restored["endpoint_config_name"], restored["version"]) == (OLD_CONFIG, "v6")
    # It checked itself before restoring the pointer: every answer named v6, nobody was paged.
    history = wf.state_history(result["executionArn"])
    assert history.index("Verify") < history.index("RestorePointer"), history
    assert wf.pages(rollout, wait_s=1) == []


def test_a_rollback_whose_answers_name_another_version_pages_and_fails_with_the_reason(
    rollout: wf.RolloutWorkflow,
) -> None:
    """v6's model was deleted and recreated under its name with another build (MODEL_VERSION v6-hotfix), so
    putting v6's config back brings that build: the answers name v6-hotfix, not v6, the release the pointer says
    is restored. The on-call is paged, the execution fails with the reason, the pointer is left alone."""
    promoted_pointer = promoted_v7()
    sagemaker = boto3.client("sagemaker")
    sagemaker.delete_model(ModelName="manga-chat-v6-model")
    hotfix = ModelContract(endpoint_name=wf.ENDPOINT, variant_name=wf.PRIMARY, model_version="v6-hotfix")
    sagemaker.create_model(
        ModelName="manga-chat-v6-model",
        ExecutionRoleArn=wf.ROLE,
        PrimaryContainer={"Image": f"{wf.IMAGE_REPOSITORY}:v6-hotfix", "Environment": hotfix.environment()},
    )

    result = wf.wait(wf.start(rollout.rollback_arn, rollback_input(rollback_id="ops-13"), name="ops-13"), timeout_s=60)

    assert (result["status"], result["error"]) == ("FAILED", "RollbackNotVerified"), result
    assert "back on manga-chat-v6-config, but 5 of 5 answers do not name v6" in result["cause"], result["cause"]
    assert "5 named v6-hotfix" in result["cause"], result["cause"]
    [page] = wf.pages(rollout, wait_s=2)
    assert page["Subject"] == "PAGE: rollback of manga-chat not verified"
    assert "ops-13" in page["Message"] and "5 named v6-hotfix" in page["Message"], page["Message"]
    assert "Rollback FAILED: operator action needed" in [n["Subject"] for n in wf.notifications(rollout, wait_s=2)]
    history = wf.state_history(result["executionArn"])
    assert "RestorePointer" not in history and "GiveLeaseBack" in history, history
    pointer = json.loads(boto3.client("ssm").get_parameter(Name=POINTER)["Parameter"]["Value"])
    assert pointer == promoted_pointer
    [record] = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    assert record.outcome == "failed" and record.reason.startswith("RollbackNotVerified: endpoint manga-chat is back")
    assert lease_row(rollout) is None


def promoted_v7() -> dict[str, Any]:
    """The endpoint as a promotion leaves it: v7 alone on its final config, the pointer naming v6 before it."""
    contract = ModelContract(endpoint_name=wf.ENDPOINT, variant_name=wf.PRIMARY, model_version="v7")
    sagemaker = boto3.client("sagemaker")
    sagemaker.create_model(
        ModelName="manga-chat-v7-final-model",
        ExecutionRoleArn=wf.ROLE,
        PrimaryContainer={"Image": f"{wf.IMAGE_REPOSITORY}:v7", "Environment": contract.environment()},
    )
    variant: Any = {
        "VariantName": wf.PRIMARY,
        "ModelName": "manga-chat-v7-final-model",
        "InstanceType": wf.INSTANCE_TYPE,
        "InitialInstanceCount": 2,
        "InitialVariantWeight": 1.0,
    }
    sagemaker.create_endpoint_config(EndpointConfigName=PROMOTED_CONFIG, ProductionVariants=[variant])
    sagemaker.update_endpoint(EndpointName=wf.ENDPOINT, EndpointConfigName=PROMOTED_CONFIG)
    wait_in_service()
    pointer = {
        "model": "manga-llama",
        "version": "v7",
        "sagemaker_model": "manga-chat-v7-final-model",
        "endpoint_config_name": PROMOTED_CONFIG,
        "rollout_id": "v7",
        "previous_endpoint_config_name": OLD_CONFIG,
        "previous_version": "v6",
    }
    boto3.client("ssm").put_parameter(Name=POINTER, Value=json.dumps(pointer), Type="String", Overwrite=True)
    return pointer


def test_rollback_without_target_or_pointer_fails_with_a_clear_error_and_changes_nothing(
    rollout: wf.RolloutWorkflow,
) -> None:
    mid_rollout()
    request = {"endpoint_name": wf.ENDPOINT, "rollback_id": "ops-4"}

    result = wf.wait(wf.start(rollout.rollback_arn, request, name="ops-4"), timeout_s=30)

    assert result["status"] == "FAILED" and result["error"] == "RollbackInputError", result
    assert "names no previous config" in result["cause"] and "nothing was changed" in result["cause"]
    assert wait_in_service()["EndpointConfigName"] == NEW_CONFIG
    [note] = wf.notifications(rollout, wait_s=2)
    assert note["Subject"] == "Rollback FAILED: operator action needed"


def test_rollback_refuses_while_another_writer_holds_the_lease(rollout: wf.RolloutWorkflow) -> None:
    live_pointer()
    mid_rollout()
    assert EndpointLease(rollout.lease_table).acquire(wf.ENDPOINT, "alarm_responder/x", 600)

    result = wf.wait(wf.start(rollout.rollback_arn, rollback_input(), name="ops-5"), timeout_s=30)

    assert result["status"] == "FAILED", result
    assert "ConditionalCheckFailed" in result["error"] + result["cause"], result
    assert wait_in_service()["EndpointConfigName"] == NEW_CONFIG


def test_a_rollback_joins_the_rollback_already_at_work_and_changes_nothing(rollout: wf.RolloutWorkflow) -> None:
    """A broken canary trips several alarms; each starts a rollback. The on-call gets one rollback, not
    one success and a "Rollback FAILED" page per other alarm."""
    mid_rollout()
    assert EndpointLease(rollout.lease_table).acquire(wf.ENDPOINT, "rollback/oom-canary-1", 600)
    second = {**RESPONDER_ROLLBACK, "rollback_id": "breaker-canary-2"}

    result = wf.wait(wf.start(rollout.rollback_arn, second, name="breaker-canary-2"), timeout_s=30)

    assert result["status"] == "SUCCEEDED", result
    assert wf.state_history(result["executionArn"])[-1] == "AlreadyRollingBack"
    assert wait_in_service()["EndpointConfigName"] == NEW_CONFIG  # left to the rollback at work
    assert EndpointLease(rollout.lease_table).current(wf.ENDPOINT).holder == "rollback/oom-canary-1"  # type: ignore[union-attr]
    assert wf.notifications(rollout) == []


def test_the_responders_rollback_aborts_the_rollout_in_flight_and_never_undoes_a_promotion(
    rollout: wf.RolloutWorkflow,
) -> None:
    live = live_pointer()
    mid_rollout()  # v7 canary at 25 %, not promoted: the pointer still names v6's config
    request = RESPONDER_ROLLBACK

    first = wf.wait(wf.start(rollout.rollback_arn, request, name="oom-canary-1"), timeout_s=60)
    assert first["status"] == "SUCCEEDED", first
    restored = back_on_old_config()["EndpointConfigName"]
    assert json.loads(boto3.client("ssm").get_parameter(Name=POINTER)["Parameter"]["Value"]) == live

    # A second canary alarm after the rollback must not walk the fleet back to v5.
    second = {**request, "rollback_id": "ttft-canary-2"}
    again = wf.wait(wf.start(rollout.rollback_arn, second, name="ttft-canary-2"), timeout_s=60)
    assert again["status"] == "SUCCEEDED", again
    assert "RestoreConfig" not in wf.state_history(again["executionArn"])
    assert back_on_old_config()["EndpointConfigName"] == restored  # the copy it found counts as restored


def test_a_rollback_aborts_a_running_rollout_that_holds_the_lease(rollout: wf.RolloutWorkflow) -> None:
    """The responder's rollback during a rollout: takes the rollout's lease, stops it, returns the endpoint.

    No model pointer exists yet (a first rollout): the rollout's lease row says where it started.
    """
    request = rollout_request(steps=[5, 25, 100], approval_steps=[25])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        # Through the request URL, as a person starts it: an approval needs the request it records.
        execution = wf.start_rollout(request)
        # The 25 % step asks its approval before its weights change: the rollout waits for a person, canary at 5 %.
        wf.approval_link(rollout, "approve", execution)
    lease = EndpointLease(rollout.lease_table).current(wf.ENDPOINT)
    assert lease is not None and lease.holder == "canary_rollout/llama-q4-v7"
    assert lease.execution_arn == execution and lease.return_config == OLD_CONFIG
    assert wf.canary_weight() == 5.0

    result = wf.wait(wf.start(rollout.rollback_arn, RESPONDER_ROLLBACK, name="oom-canary-1"), timeout_s=60)

    assert result["status"] == "SUCCEEDED", result
    history = wf.state_history(result["executionArn"])
    assert history.index("StopRollout") < history.index("ZeroCanary") < history.index("RestoreConfig")
    stopped = wf.wait(execution, timeout_s=10)  # moto records no error/cause for a stop: the audit says why
    assert stopped["status"] == "ABORTED", {k: stopped.get(k) for k in ("status", "error", "cause")}
    back_on_old_config()
    assert "Item" not in boto3.client("dynamodb").get_item(
        TableName=rollout.lease_table, Key={"endpoint_name": {"S": wf.ENDPOINT}}
    )
    [record] = [r for r in AuditTable(rollout.audit_table).list(wf.ENDPOINT) if r.actor != "canary_rollout"]
    assert record.outcome == "applied" and "OomCaught" in record.reason, record


@pytest.mark.parametrize(
    "named",
    [
        {"target_endpoint_config_name": "manga-chat-v5-config"},
        {"restore_pointer_json": '{"model": "x"}'},
        {"lease_holder": "canary_rollout/llama-q4-v7"},
    ],
)
def test_a_request_naming_a_target_a_pointer_or_a_holder_is_refused_and_changes_nothing(
    rollout: wf.RolloutWorkflow, named: dict[str, str]
) -> None:
    live_pointer()
    mid_rollout()
    [key] = named

    result = wf.wait(wf.start(rollout.rollback_arn, rollback_input(**named), name="ops-6"), timeout_s=30)

    assert (result["status"], result["error"]) == ("FAILED", "RollbackInputError"), result
    assert f"may not name {key}" in result["cause"] and "derived" in result["cause"], result["cause"]
    assert "HoldLease" not in wf.state_history(result["executionArn"])
    assert wait_in_service()["EndpointConfigName"] == NEW_CONFIG
    assert boto3.client("dynamodb").scan(TableName=rollout.lease_table)["Items"] == []


def test_a_forged_started_by_does_not_make_a_person_the_rollouts_holder(rollout: wf.RolloutWorkflow) -> None:
    """The rollback acts as the rollout only when the lease row names the execution that started it."""
    live_pointer()
    mid_rollout()
    assert EndpointLease(rollout.lease_table).acquire(wf.ENDPOINT, "alarm_responder/x", 600)
    forged = rollback_input(AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID="arn:aws:states:::execution:canary-rollout:v7")

    result = wf.wait(wf.start(rollout.rollback_arn, forged, name="ops-7"), timeout_s=30)

    assert result["status"] == "FAILED" and "ConditionalCheckFailed" in result["error"] + result["cause"], result
    assert EndpointLease(rollout.lease_table).current(wf.ENDPOINT).holder == "alarm_responder/x"  # type: ignore[union-attr]
    assert wait_in_service()["EndpointConfigName"] == NEW_CONFIG


def test_an_endpoint_fleet_yaml_does_not_list_is_refused_by_name(rollout: wf.RolloutWorkflow) -> None:
    request = rollback_input(endpoint_name="someone-elses-endpoint")

    result = wf.wait(wf.start(rollout.rollback_arn, request, name="ops-8"), timeout_s=30)

    assert (result["status"], result["error"]) == ("FAILED", "RollbackInputError"), result
    assert "'someone-elses-endpoint' is not managed by this stack" in result["cause"], result["cause"]


def lease_row(workflow: wf.RolloutWorkflow) -> dict[str, Any] | None:
    key = {"endpoint_name": {"S": wf.ENDPOINT}}
    return boto3.client("dynamodb").get_item(TableName=workflow.lease_table, Key=key).get("Item")


def test_a_failed_rollback_gives_its_lease_back_so_the_next_alarm_takes_over(rollout: wf.RolloutWorkflow) -> None:
    """The on-call is paged "Rollback FAILED", and the next alarm's rollback is not turned away for the lease's
    lifetime: the failed execution deleted the lease row it had taken (conditioned on its holder and execution)."""
    pointer = live_pointer() | {"endpoint_config_name": "manga-chat-v6-config-deleted"}
    boto3.client("ssm").put_parameter(Name=POINTER, Value=json.dumps(pointer), Type="String", Overwrite=True)
    mid_rollout()  # RestoreConfig will fail: the config the pointer names does not exist

    result = wf.wait(wf.start(rollout.rollback_arn, rollback_input(), name="ops-9"), timeout_s=90)

    assert result["status"] == "FAILED", result
    history = wf.state_history(result["executionArn"])
    # Its copy cannot be built (nothing to copy), so the endpoint is never asked to change.
    assert history.index("HoldLease") < history.index("CreateRestoreConfig") < history.index("GiveLeaseBack")
    assert "RestoreConfig" not in history, history
    assert lease_row(rollout) is None, lease_row(rollout)
    [note] = wf.notifications(rollout, wait_s=2)
    assert note["Subject"] == "Rollback FAILED: operator action needed"
    assert "gave its endpoint lease back" in note["Message"], note["Message"]


def test_a_rollback_takes_over_from_one_that_ended_without_giving_its_lease_back(rollout: wf.RolloutWorkflow) -> None:
    """A rollback whose execution was stopped or timed out left its lease row behind. The next alarm's rollback
    asks Step Functions about that execution (DescribeExecution), finds it ended and finishes the job: the canary
    loses its traffic now, instead of the alarm ending "AlreadyRollingBack" while the canary keeps serving."""
    live_pointer()
    mid_rollout()
    dead = wf.wait(wf.start(rollout.rollback_arn, rollback_input(endpoint_name="not-ours"), name="oom-canary-1"))
    assert dead["status"] == "FAILED", dead
    expires = int(time.time()) + 3600
    boto3.client("dynamodb").put_item(
        TableName=rollout.lease_table,
        Item={
            "endpoint_name": {"S": wf.ENDPOINT},
            "holder": {"S": "rollback/oom-canary-1"},
            "execution_arn": {"S": dead["executionArn"]},
            "expires_at": {"N": str(expires)},
            "return_config": {"S": OLD_CONFIG},
            "restore_pointer": {"S": ""},
            "fence": {"N": "1"},
        },
    )
    second = {**RESPONDER_ROLLBACK, "rollback_id": "breaker-canary-2"}

    result = wf.wait(wf.start(rollout.rollback_arn, second, name="breaker-canary-2"), timeout_s=60)

    assert result["status"] == "SUCCEEDED", result
    history = wf.state_history(result["executionArn"])
    assert "AlreadyRollingBack" not in history and "ZeroCanary" in history and "RestoreConfig" in history, history
    back_on_old_config()
    assert lease_row(rollout) is None


def test_a_rollback_waits_out_an_autoscaling_update_that_starts_just_after_it_looked(
    rollout: wf.RolloutWorkflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inspect saw the endpoint InService; an autoscaling change then puts it in Updating for longer than
    ZeroCanary's retries. SageMaker's "Cannot update in-progress endpoint" is a reason to wait and look again:
    the rollback succeeds and the canary ends with no traffic, instead of a Failed rollback with the canary
    still serving.

    Test double of timing only: the autoscaling change is started from a wrapper around the real planner, at the
    moment it first answers ``zero_canary`` (a race a test cannot otherwise hit on purpose).
    """
    live_pointer()
    mid_rollout()
    module = load_handler_module("rollback_plan")
    real = module.plan_rollback
    started: list[bool] = []

    def planner_then_autoscaling(*args: Any, **kwargs: Any) -> Any:
        step = real(*args, **kwargs)
        if step.action == "zero_canary" and not started:
            started.append(True)
            monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 16.0)
            boto3.client("sagemaker").update_endpoint_weights_and_capacities(
                EndpointName=wf.ENDPOINT,
                DesiredWeightsAndCapacities=[{"VariantName": wf.PRIMARY, "DesiredInstanceCount": 3}],
            )
            monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 0.5)
        return step

    monkeypatch.setattr(module, "plan_rollback", planner_then_autoscaling)
    patient = rollback_input(in_service={"first_wait_seconds": 1, "max_wait_seconds": 2, "timeout_seconds": 60})

    result = wf.wait(wf.start(rollout.rollback_arn, patient, name="ops-10"), timeout_s=120)

    assert started and result["status"] == "SUCCEEDED", result
    history = wf.state_history(result["executionArn"])
    assert "EndpointBusy?" in history and "WaitForEndpoint" in history, history
    assert history.count("ZeroCanary") == 2, history  # refused while Updating, then done
    described = back_on_old_config()
    assert [v["VariantName"] for v in described["ProductionVariants"]] == [wf.PRIMARY]
    assert lease_row(rollout) is None


def test_a_rollback_naming_the_primary_as_its_canary_is_refused_and_changes_nothing(
    rollout: wf.RolloutWorkflow,
) -> None:
    """Naming the primary would set its weight to 0 and send every request to the broken canary during the
    restore; the caller reads why it was refused and what to name instead."""
    live_pointer()
    mid_rollout()

    result = wf.wait(wf.start(rollout.rollback_arn, rollback_input(canary_variant_name=wf.PRIMARY), name="ops-11"))

    assert (result["status"], result["error"]) == ("FAILED", "RollbackInputError"), result
    assert "canary_variant_name 'primary' is a primary variant of 'manga-chat'" in result["cause"], result["cause"]
    assert "name the canary (['canary']) or leave it out" in result["cause"]
    assert "HoldLease" not in wf.state_history(result["executionArn"])
    assert wf.canary_weight() == 25.0 and wait_in_service()["EndpointConfigName"] == NEW_CONFIG


def test_a_rollback_that_names_no_canary_takes_the_traffic_off_fleet_yamls_canary_first(
    rollout: wf.RolloutWorkflow,
) -> None:
    """The canary comes from fleet.yaml, not from the caller: its weight goes to 0 before the config is restored."""
    live_pointer()
    mid_rollout()
    request = {k: v for k, v in rollback_input().items() if k != "canary_variant_name"}

    result = wf.wait(wf.start(rollout.rollback_arn, request, name="ops-12"), timeout_s=60)

    assert result["status"] == "SUCCEEDED", result
    history = wf.state_history(result["executionArn"])
    assert "ZeroCanary" in history and history.index("ZeroCanary") < history.index("RestoreConfig"), history
    back_on_old_config()
