"""Who retries what: botocore's standard mode retries throttling, tenacity only waits out an update in progress.

The emulator cannot throttle. Throttling is answered at botocore's wire (``tests.aws_wire``), where
botocore's retry handler sees it; the in-progress answers botocore does not retry are answered by
botocore's Stubber on a real client, checked against the real API model.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from fleetops.aws import clients
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.retry import FAST_RETRY, is_update_in_progress
from fleetops.aws.sagemaker_endpoint import VariantWeights
from tests.aws_wire import DUMMY_ENDPOINT, THROTTLED, ScriptedSends, json_error, skip_backoff

TARGET = {
    "ServiceNamespace": "sagemaker",
    "ResourceIds": ["endpoint/ep/variant/primary"],
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
}
SCALABLE_TARGET = {
    "ServiceNamespace": "sagemaker",
    "ResourceId": "endpoint/ep/variant/primary",
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    "MinCapacity": 2,
    "MaxCapacity": 8,
    "RoleARN": "arn:aws:iam::123456789012:role/aas",
}
FOUND = {"ScalableTargets": [{**SCALABLE_TARGET, "CreationTime": "2026-11-21T00:00:00Z"}]}
FOUND_ON_THE_WIRE = {"ScalableTargets": [{**SCALABLE_TARGET, "CreationTime": 1795219200.0}]}
UPDATING = 'Cannot update in-progress endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep".'


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Default clients aim at an address that never resolves, with keys that sign but open nothing."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", DUMMY_ENDPOINT)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    return skip_backoff(monkeypatch)


def test_default_clients_use_botocore_standard_retries_and_honour_aws_endpoint_url() -> None:
    client = clients.client("application-autoscaling")
    retries = client.meta.config.retries  # type: ignore[attr-defined]  # set by Config(retries=...), not in the stubs
    assert retries == {"mode": "standard", "total_max_attempts": clients.MAX_ATTEMPTS}
    assert client.meta.endpoint_url == DUMMY_ENDPOINT


def test_throttling_is_retried_by_botocore_until_it_succeeds(backoffs: list[float]) -> None:
    client = clients.client("application-autoscaling")
    wire = ScriptedSends([THROTTLED, THROTTLED], rest=(200, FOUND_ON_THE_WIRE)).attach(
        client, "DescribeScalableTargets"
    )

    target = AutoScaling(client=client, retry=FAST_RETRY).get_target("ep", "primary")

    assert target is not None and (target.min_capacity, target.max_capacity) == (2, 8)
    assert wire.sends == 3 and len(backoffs) == 2  # botocore sent it again twice, pausing before each
    assert wire.bodies == [TARGET] * 3


def test_persistent_throttling_surfaces_after_botocore_attempts_with_no_retry_on_top(backoffs: list[float]) -> None:
    client = clients.client("application-autoscaling")
    wire = ScriptedSends([], rest=THROTTLED).attach(client, "DescribeScalableTargets")

    with pytest.raises(ClientError, match="ThrottlingException"):
        AutoScaling(client=client, retry=FAST_RETRY).get_target("ep", "primary")

    assert wire.sends == clients.MAX_ATTEMPTS  # not multiplied by the adapter's own policy
    assert len(backoffs) == clients.MAX_ATTEMPTS - 1


def test_a_refusal_is_sent_once(backoffs: list[float]) -> None:
    client = clients.client("application-autoscaling")
    wire = ScriptedSends([json_error("ValidationException", "bad resource id")]).attach(
        client, "DescribeScalableTargets"
    )

    with pytest.raises(ClientError, match="bad resource id"):
        AutoScaling(client=client, retry=FAST_RETRY).get_target("ep", "primary")

    assert wire.sends == 1 and backoffs == []


@pytest.fixture
def stubbed() -> tuple[AutoScaling, Stubber]:
    client = boto3.client("application-autoscaling", region_name="us-east-1")
    return AutoScaling(client=client, retry=FAST_RETRY), Stubber(client)


def test_a_concurrent_scaling_update_is_waited_out(stubbed: tuple[AutoScaling, Stubber]) -> None:
    scaling, stub = stubbed
    stub.add_client_error("describe_scalable_targets", "ConcurrentUpdateException", "busy", 400)
    stub.add_client_error("describe_scalable_targets", "ConcurrentUpdateException", "busy", 400)
    stub.add_response("describe_scalable_targets", FOUND, TARGET)
    with stub:
        target = scaling.get_target("ep", "primary")
    stub.assert_no_pending_responses()
    assert target is not None and (target.min_capacity, target.max_capacity) == (2, 8)


def test_a_lasting_concurrent_update_surfaces_the_original_error(stubbed: tuple[AutoScaling, Stubber]) -> None:
    scaling, stub = stubbed
    for _ in range(FAST_RETRY.attempts):
        stub.add_client_error("describe_scalable_targets", "ConcurrentUpdateException", "busy", 400)
    with stub, pytest.raises(ClientError, match="ConcurrentUpdateException"):
        scaling.get_target("ep", "primary")
    stub.assert_no_pending_responses()


def test_a_validation_error_is_not_retried(stubbed: tuple[AutoScaling, Stubber]) -> None:
    scaling, stub = stubbed
    stub.add_client_error("describe_scalable_targets", "ValidationException", "bad resource id", 400)
    with stub, pytest.raises(ClientError, match="bad resource id"):
        scaling.get_target("ep", "primary")
    stub.assert_no_pending_responses()


def test_an_updating_sagemaker_endpoint_is_waited_out() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    described = {
        "EndpointName": "ep",
        "EndpointArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep",
        "EndpointStatus": "InService",
        "CreationTime": "2026-11-21T00:00:00Z",
        "LastModifiedTime": "2026-11-21T00:00:00Z",
        "ProductionVariants": [{"VariantName": "primary", "CurrentWeight": 1.0}],
    }
    update = {"EndpointName": "ep", "DesiredWeightsAndCapacities": [{"VariantName": "primary", "DesiredWeight": 0.5}]}
    with Stubber(client) as stub:
        stub.add_response("describe_endpoint", described, {"EndpointName": "ep"})
        stub.add_client_error(
            "update_endpoint_weights_and_capacities", "ValidationException", UPDATING, 400, expected_params=update
        )
        stub.add_response("update_endpoint_weights_and_capacities", {"EndpointArn": described["EndpointArn"]}, update)
        before = VariantWeights(client=client, retry=FAST_RETRY).set_weight("ep", "primary", 0.5)
        stub.assert_no_pending_responses()
    assert before == {"primary": 1.0}


@pytest.mark.parametrize(
    ("code", "message", "waited_out"),
    [
        ("ValidationException", UPDATING, True),
        ("ConcurrentUpdateException", "busy", True),
        ("ValidationException", "Could not find endpoint", False),
        ("ThrottlingException", "Rate exceeded", False),  # botocore's
        ("InternalFailure", "oops", False),  # botocore's (a 5xx)
    ],
)
def test_only_an_update_in_progress_is_waited_out(code: str, message: str, waited_out: bool) -> None:
    error = ClientError({"Error": {"Code": code, "Message": message}}, "UpdateEndpointWeightsAndCapacities")
    assert is_update_in_progress(error) is waited_out
