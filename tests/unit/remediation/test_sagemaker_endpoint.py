"""Waiting for InService, checked with botocore's Stubber (real DescribeEndpoint response shapes), no sleeping."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from fleetops.aws.sagemaker_endpoint import EndpointNotReadyError, VariantWeights, wait_in_service


def _described(status: str) -> dict[str, Any]:
    return {
        "EndpointName": "manga-chat-prod",
        "EndpointArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/manga-chat-prod",
        "EndpointConfigName": "c1",
        "EndpointStatus": status,
        "CreationTime": "2026-11-21T00:00:00Z",
        "LastModifiedTime": "2026-11-21T00:00:00Z",
    }


def test_waits_through_updating_with_growing_pauses() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    pauses: list[float] = []
    with Stubber(client) as stub:
        for status in ("Updating", "Updating", "SystemUpdating", "InService"):
            stub.add_response("describe_endpoint", _described(status), {"EndpointName": "manga-chat-prod"})
        assert wait_in_service("manga-chat-prod", client=client, sleep=pauses.append) == "InService"
        stub.assert_no_pending_responses()
    assert len(pauses) == 3 and pauses == sorted(pauses) and max(pauses) <= 5.0


def test_a_failed_endpoint_is_reported_at_once() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response("describe_endpoint", _described("Failed"), {"EndpointName": "manga-chat-prod"})
        with pytest.raises(EndpointNotReadyError, match="'manga-chat-prod' is Failed, not InService"):
            wait_in_service("manga-chat-prod", client=client, sleep=lambda _: None)


def test_gives_up_after_the_timeout_naming_the_last_status() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_response("describe_endpoint", _described("Updating"), {"EndpointName": "manga-chat-prod"})
        with pytest.raises(EndpointNotReadyError, match="is Updating, not InService"):
            # timeout 0: one look, then the stop condition holds
            wait_in_service("manga-chat-prod", client=client, timeout_s=0.0, sleep=lambda _: None)


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        (
            [
                {"VariantName": "primary", "CurrentInstanceCount": 6},
                {"VariantName": "canary", "CurrentInstanceCount": 1},
            ],
            6,
        ),
        ([{"VariantName": "primary"}], None),  # SageMaker leaves the count out while the endpoint is being created
        ([{"VariantName": "canary", "CurrentInstanceCount": 1}], None),  # no such variant
    ],
)
def test_instance_count_is_the_variants_current_instance_count(
    live: list[dict[str, Any]], expected: int | None
) -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stub:
        described = {**_described("InService"), "ProductionVariants": live}
        stub.add_response("describe_endpoint", described, {"EndpointName": "manga-chat-prod"})
        assert VariantWeights(client=client).instance_count("manga-chat-prod", "primary") == expected
        stub.assert_no_pending_responses()
