"""AWS calls the emulator cannot answer faithfully, checked against the real API model (Stubber or the wire)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from fleetops.aws import clients
from fleetops.aws.autoscaling import DIMENSION, NAMESPACE, AutoScaling
from fleetops.aws.retry import FAST_RETRY
from fleetops.aws.sagemaker_endpoint import VariantWeights
from fleetops.remediation.rollback_workflow import RollbackWorkflow, execution_name
from tests.aws_wire import DUMMY_ENDPOINT, THROTTLED, ScriptedSends, skip_backoff

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:rollback"


def test_canary_weight_zero_is_a_valid_update_endpoint_weights_call() -> None:
    # moto 5.2.5 drops a weight of 0, so the request itself is checked against SageMaker's API model here.
    client = boto3.client("sagemaker", region_name="us-east-1")
    described = {
        "EndpointName": "manga-chat-prod",
        "EndpointArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/manga-chat-prod",
        "EndpointConfigName": "c1",
        "EndpointStatus": "InService",
        "CreationTime": "2026-11-21T00:00:00Z",
        "LastModifiedTime": "2026-11-21T00:00:00Z",
        "ProductionVariants": [
            {"VariantName": "primary", "CurrentWeight": 0.9, "DesiredWeight": 0.9},
            {"VariantName": "canary", "CurrentWeight": 0.1, "DesiredWeight": 0.1},
        ],
    }
    with Stubber(client) as stub:
        stub.add_response("describe_endpoint", described, {"EndpointName": "manga-chat-prod"})
        stub.add_response(
            "update_endpoint_weights_and_capacities",
            {"EndpointArn": described["EndpointArn"]},
            {
                "EndpointName": "manga-chat-prod",
                "DesiredWeightsAndCapacities": [{"VariantName": "canary", "DesiredWeight": 0.0}],
            },
        )
        before = VariantWeights(client=client, retry=FAST_RETRY).set_weight("manga-chat-prod", "canary", 0.0)
        stub.assert_no_pending_responses()
    assert before == {"primary": 0.9, "canary": 0.1}


def test_unknown_variant_weight_is_refused_before_any_change() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "describe_endpoint",
            {
                "EndpointName": "e",
                "EndpointArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/e",
                "EndpointStatus": "InService",
                "CreationTime": "2026-11-21T00:00:00Z",
                "LastModifiedTime": "2026-11-21T00:00:00Z",
                "ProductionVariants": [{"VariantName": "primary"}],
            },
        )
        with pytest.raises(ValueError, match="endpoint 'e' has no variant 'canary'; it has \\['primary'\\]"):
            VariantWeights(client=client).set_weight("e", "canary", 0.0)


def test_throttled_register_scalable_target_is_retried_by_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    # Test double, named: ScriptedSends answers at botocore's wire, so botocore's own retries (not the
    # adapter's) send the same valid request again after each throttle; the parameters are still
    # validated against the API model before the first send.
    monkeypatch.setenv("AWS_ENDPOINT_URL", DUMMY_ENDPOINT)
    backoffs = skip_backoff(monkeypatch)
    client = clients.client("application-autoscaling")
    params = {
        "ServiceNamespace": NAMESPACE,
        "ResourceId": "endpoint/e/variant/primary",
        "ScalableDimension": DIMENSION,
        "MinCapacity": 6,
        "MaxCapacity": 12,
    }
    wire = ScriptedSends([THROTTLED, THROTTLED], rest=(200, {})).attach(client, "RegisterScalableTarget")

    AutoScaling(client=client, retry=FAST_RETRY).set_capacity("e", "primary", 6, 12)

    assert wire.bodies == [params] * 3 and len(backoffs) == 2


def test_rollback_start_is_idempotent_per_execution_name() -> None:
    client = boto3.client("stepfunctions", region_name="us-east-1")
    name = execution_name("alarm|2026-11-21T19:05:00.000+0000", "oom-manga-chat-prod")
    payload = json.dumps(
        {
            "endpoint_name": "manga-chat-prod",
            "rollback_id": name,
            "reason": "r",
            "requested_by": "alarm_responder",
            "abort_only": True,
            "canary_variant_name": "canary",
        }
    )
    expected = {"stateMachineArn": ARN, "name": name, "input": payload}
    started = {
        "executionArn": f"{ARN.replace(':stateMachine:', ':execution:')}:{name}",
        "startDate": "2026-11-21T19:05:01Z",
    }
    with Stubber(client) as stub:
        stub.add_response("start_execution", started, expected)
        stub.add_client_error("start_execution", "ExecutionAlreadyExists", "exists", 400, expected_params=expected)
        workflow = RollbackWorkflow(ARN, client=client)
        first = workflow.start("manga-chat-prod", "r", "alarm_responder", name, "canary")
        second = workflow.start("manga-chat-prod", "r", "alarm_responder", name, "canary")
    assert first == (started["executionArn"], True)
    assert second == (started["executionArn"], False)


@pytest.mark.parametrize(
    "key", ["a", "x" * 500, "fleet-remediation-oom-manga-chat-prod-canary|2026-11-21T19:05:00.000+0000"]
)
def test_execution_names_are_valid(key: str) -> None:
    name = execution_name(key, "oom-manga-chat-prod/ü")
    assert len(name) <= 80 and all(c.isalnum() or c in "-_" for c in name)
    assert name == execution_name(key, "oom-manga-chat-prod/ü")  # deterministic
    assert name != execution_name(key + "1", "oom-manga-chat-prod/ü")
