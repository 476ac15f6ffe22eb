"""Retries of AWS calls, checked against the real API model with botocore's Stubber.

The emulator cannot throttle, so a Stubber on a real client stands in for AWS's error answers.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.retry import FAST_RETRY, is_retryable

TARGET = {
    "ServiceNamespace": "sagemaker",
    "ResourceIds": ["endpoint/ep/variant/primary"],
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
}
FOUND = {
    "ScalableTargets": [
        {
            "ServiceNamespace": "sagemaker",
            "ResourceId": "endpoint/ep/variant/primary",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "MinCapacity": 2,
            "MaxCapacity": 8,
            "RoleARN": "arn:aws:iam::123456789012:role/aas",
            "CreationTime": "2026-11-21T00:00:00Z",
        }
    ]
}


@pytest.fixture
def stubbed() -> tuple[AutoScaling, Stubber]:
    client = boto3.client(
        "application-autoscaling", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return AutoScaling(client=client, retry=FAST_RETRY), Stubber(client)


def test_throttling_is_retried_until_it_succeeds(stubbed: tuple[AutoScaling, Stubber]) -> None:
    scaling, stub = stubbed
    stub.add_client_error("describe_scalable_targets", "ThrottlingException", "Rate exceeded", 400)
    stub.add_client_error("describe_scalable_targets", "ConcurrentUpdateException", "busy", 400)
    stub.add_response("describe_scalable_targets", FOUND, TARGET)
    with stub:
        target = scaling.get_target("ep", "primary")
    stub.assert_no_pending_responses()
    assert target is not None and (target.min_capacity, target.max_capacity) == (2, 8)


def test_persistent_throttling_surfaces_the_original_error(stubbed: tuple[AutoScaling, Stubber]) -> None:
    scaling, stub = stubbed
    for _ in range(FAST_RETRY.attempts):
        stub.add_client_error("describe_scalable_targets", "ThrottlingException", "Rate exceeded", 400)
    with stub, pytest.raises(ClientError, match="ThrottlingException"):
        scaling.get_target("ep", "primary")


def test_a_validation_error_is_not_retried(stubbed: tuple[AutoScaling, Stubber]) -> None:
    scaling, stub = stubbed
    stub.add_client_error("describe_scalable_targets", "ValidationException", "bad resource id", 400)
    with stub, pytest.raises(ClientError, match="bad resource id"):
        scaling.get_target("ep", "primary")
    stub.assert_no_pending_responses()


def test_an_updating_sagemaker_endpoint_is_retryable() -> None:
    updating = ClientError(
        {"Error": {"Code": "ValidationException", "Message": 'Cannot update in-progress endpoint "arn:...".'}},
        "UpdateEndpointWeightsAndCapacities",
    )
    assert is_retryable(updating)
