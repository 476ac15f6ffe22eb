"""A SageMaker variant's instance count follows its scalable target, set directly or by a scheduled action.

Emulated by this project: ``devtools/emulator_extensions/application_autoscaling.py`` (moto stores targets and
scheduled actions but scales nothing). Everything is reached over HTTP through the moto server, as the pre-scaler
and the alarm responder reach Application Auto Scaling.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from devtools import emulator_extensions
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from fleetops.aws.autoscaling import DIMENSION

ENDPOINT = "manga-chat"
RESOURCE = f"endpoint/{ENDPOINT}/variant/primary"


@pytest.fixture(autouse=True)
def _endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ENDPOINT`` with one instance on its primary variant, registered between 1 and 6."""
    emulator_extensions.install()
    monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 0.3)
    sagemaker = boto3.client("sagemaker")
    sagemaker.create_model(
        ModelName="m1",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker-execution",
        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm:1"},
    )
    variant: Any = {
        "VariantName": "primary",
        "ModelName": "m1",
        "InitialInstanceCount": 1,
        "InstanceType": "ml.g5.2xlarge",
        "InitialVariantWeight": 1.0,
    }
    sagemaker.create_endpoint_config(EndpointConfigName="c1", ProductionVariants=[variant])
    sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="c1")
    register(1, 6)


def register(low: int, high: int) -> None:
    boto3.client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=RESOURCE,
        ScalableDimension=DIMENSION,
        MinCapacity=low,
        MaxCapacity=high,
    )


def instances() -> tuple[str, int, int]:
    """The endpoint's status and the primary variant's desired and current instance counts."""
    described = boto3.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    [variant] = described["ProductionVariants"]
    return described["EndpointStatus"], variant["DesiredInstanceCount"], variant["CurrentInstanceCount"]


def settled() -> tuple[str, int, int]:
    deadline = time.monotonic() + 10
    while (seen := instances())[0] != "InService" and time.monotonic() < deadline:
        time.sleep(0.1)
    return seen


def test_a_raised_min_capacity_scales_the_variant_out_and_a_lowered_max_scales_it_in() -> None:
    assert instances() == ("InService", 1, 1)  # inside 1..6: nothing to do

    register(3, 6)

    assert instances()[0] == "Updating"  # as UpdateEndpointWeightsAndCapacities: an update of the endpoint
    assert settled() == ("InService", 3, 3)
    register(1, 2)
    assert settled() == ("InService", 2, 2)
    register(1, 6)  # back inside: target tracking's business from here on, not emulated
    assert settled() == ("InService", 2, 2)


def test_a_scheduled_action_sets_the_limits_once_its_time_has_come() -> None:
    autoscaling = boto3.client("application-autoscaling")
    soon = datetime.now(UTC) + timedelta(seconds=2)
    for name, schedule, low in (("friday", f"at({soon:%Y-%m-%dT%H:%M:%S})", 4), ("weekly", "cron(0 11 ? * FRI *)", 5)):
        autoscaling.put_scheduled_action(
            ServiceNamespace="sagemaker",
            ScheduledActionName=name,
            ResourceId=RESOURCE,
            ScalableDimension=DIMENSION,
            Schedule=schedule,
            Timezone="UTC",
            ScalableTargetAction={"MinCapacity": low, "MaxCapacity": 6},
        )
    assert instances() == ("InService", 1, 1)  # not yet

    time.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()) + 1.1)

    assert settled() == ("InService", 4, 4)  # cron schedules are not emulated: the weekly one never runs
    [target] = autoscaling.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[RESOURCE])[
        "ScalableTargets"
    ]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (4, 6)
    register(1, 6)  # a later register overrides the action's limits; the action has run and does not run again
    time.sleep(0.5)
    assert settled() == ("InService", 4, 4)
    assert (
        autoscaling.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[RESOURCE])["ScalableTargets"][
            0
        ]["MinCapacity"]
        == 1
    )


def test_an_endpoint_updating_is_scaled_once_it_is_in_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 1.0)
    boto3.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=ENDPOINT, DesiredWeightsAndCapacities=[{"VariantName": "primary", "DesiredWeight": 1.0}]
    )

    register(3, 6)  # while it updates: nothing can change yet (the API would refuse an update)

    time.sleep(1.1)
    assert instances()[0] == "Updating"  # the first update done, the raise's update under way
    assert settled() == ("InService", 3, 3)
