"""Promotion and rollback keep the endpoint whole: every field and tag of the serving config, and the instances
serving at promotion.

The workflows run from their ASL files on the moto server (see ``conftest.py``). moto 5.2.5 keeps every
``ProductionVariant`` field and the config's ``DataCaptureConfig``, ``KmsKeyId``, ``AsyncInferenceConfig`` and tags,
so those are checked here end to end. It drops ``ExplainerConfig`` and ``ShadowProductionVariants`` (its
CreateEndpointConfig does not read them) and a serverless variant cannot serve a GPU model: those are checked at the
builder level, against botocore's real API model, in ``tests/unit/rollout/test_config_copy.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.restored_config import serving_restored
from fleetops.model_contract import ModelContract
from tests.integration.workflows.conftest import HEALTHY, rollout_request

CONFIG = "manga-chat-v6-config"
#: Fields of the primary variant the rollout does not own: each must come out of promotion unchanged.
VARIANT_FIELDS: dict[str, Any] = {
    "InstanceType": wf.INSTANCE_TYPE,
    "VolumeSizeInGB": 200,
    "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
    "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 8},
    "CoreDumpConfig": {"DestinationS3Uri": "s3://manga-llm-ops/core-dumps/"},
    "EnableSSMAccess": True,
}
#: Config-level fields moto keeps (production's own data capture, not a shadowed rollout's).
CONFIG_FIELDS: dict[str, Any] = {
    "DataCaptureConfig": {
        "EnableCapture": True,
        "InitialSamplingPercentage": 2,
        "DestinationS3Uri": "s3://manga-llm-ops/production-capture/",
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
    },
    "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "AsyncInferenceConfig": {"OutputConfig": {"S3OutputPath": "s3://manga-llm-ops/async/"}},
}
TAGS: Any = [{"Key": "team", "Value": "manga-assistant"}, {"Key": "cost-center", "Value": "ml-4711"}]


@pytest.fixture
def whole(monkeypatch: pytest.MonkeyPatch) -> Iterator[wf.RolloutWorkflow]:
    """Both workflows deployed; the endpoint on a config that carries every field and tag above."""
    deployed = wf.deploy()
    monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 0.5)
    for key, value in deployed.environment.items():
        monkeypatch.setenv(key, value)
    create_whole_endpoint()
    with wf.handlers():
        yield deployed


def create_whole_endpoint(instance_type: str = wf.INSTANCE_TYPE, instance_count: int = 2) -> None:
    sagemaker = boto3.client("sagemaker")
    sagemaker.create_model(
        ModelName="manga-chat-v6-model",
        ExecutionRoleArn=wf.ROLE,
        PrimaryContainer={
            "Image": f"{wf.IMAGE_REPOSITORY}:v6",
            # The model contract, as every model the project creates carries it: answers name v6.
            "Environment": ModelContract(
                endpoint_name=wf.ENDPOINT, variant_name=wf.PRIMARY, model_version="v6"
            ).environment(),
        },
    )
    primary: Any = {
        "VariantName": wf.PRIMARY,
        "ModelName": "manga-chat-v6-model",
        "InitialInstanceCount": instance_count,
        "InitialVariantWeight": 1.0,
        **VARIANT_FIELDS,
        "InstanceType": instance_type,
        **wf.hosting().variant_fields(),
    }
    sagemaker.create_endpoint_config(
        EndpointConfigName=CONFIG, ProductionVariants=[primary], Tags=TAGS, **CONFIG_FIELDS
    )
    sagemaker.create_endpoint(EndpointName=wf.ENDPOINT, EndpointConfigName=CONFIG)


def described(config_name: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[dict[str, str]]]:
    """A config's own fields, its variants by name and its tags."""
    sagemaker = boto3.client("sagemaker")
    config: dict[str, Any] = dict(sagemaker.describe_endpoint_config(EndpointConfigName=config_name))
    tags = sagemaker.list_tags(ResourceArn=config["EndpointConfigArn"])["Tags"]
    variants = {v["VariantName"]: dict(v) for v in config.pop("ProductionVariants")}
    own = {k: v for k, v in config.items() if k in CONFIG_FIELDS}
    return own, variants, [{"Key": t["Key"], "Value": t["Value"]} for t in tags]


def unowned(variant: dict[str, Any]) -> dict[str, Any]:
    return {k: variant.get(k) for k in VARIANT_FIELDS}


def serving() -> dict[str, Any]:
    return dict(boto3.client("sagemaker").describe_endpoint(EndpointName=wf.ENDPOINT))


def promote(rollout_id: str, version: str, **changes: Any) -> dict[str, Any]:
    request = rollout_request(rollout_id=rollout_id, steps=[100], **changes)
    request["model"] = request["model"] | {"version": version}
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        return wf.wait(wf.start_rollout(request), timeout_s=90)


def test_promotion_and_rollback_keep_every_field_and_tag_of_the_config(whole: wf.RolloutWorkflow) -> None:
    first = promote("llama-q4-v7", "v7")
    assert first["status"] == "SUCCEEDED", first

    # The canary config: the primary copied whole next to the canary, which takes the primary's fields but not
    # its managed scaling bounds (its capacity is the request's).
    own, variants, tags = described("manga-chat-llama-q4-v7-canary")
    assert (own, tags) == (CONFIG_FIELDS, TAGS)
    assert unowned(variants["primary"]) == VARIANT_FIELDS
    assert unowned(variants["canary"]) == VARIANT_FIELDS | {"ManagedInstanceScaling": None}
    # The promoted config: the same fields, the tags, the new model on the primary variant.
    assert serving()["EndpointConfigName"] == "manga-chat-llama-q4-v7-final"
    own, variants, tags = described("manga-chat-llama-q4-v7-final")
    assert (own, tags, sorted(variants)) == (CONFIG_FIELDS, TAGS, ["primary"])
    assert unowned(variants["primary"]) == VARIANT_FIELDS
    assert variants["primary"]["ModelName"] == "manga-chat-llama-q4-v7-final-model"
    assert variants["primary"]["InstanceType"] == wf.INSTANCE_TYPE

    # A second promotion, rolled back: the endpoint returns to the first rollout's config, still whole.
    second = promote("llama-q4-v8", "v8")
    assert second["status"] == "SUCCEEDED", second
    back = {
        "endpoint_name": wf.ENDPOINT,
        "rollback_id": "ops-1",
        "reason": "TTFT regression seen by support",
        "requested_by": "arn:aws:iam::123456789012:user/ayumi",
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 10},
    }
    rolled_back = wf.wait(wf.start(whole.rollback_arn, back, name="ops-1"), timeout_s=60)
    assert rolled_back["status"] == "SUCCEEDED", rolled_back
    # As the rollback's copy of that config (named after it, with the instances serving at the rollback).
    restored = serving_restored(wf.ENDPOINT, "manga-chat-llama-q4-v7-final")["EndpointConfigName"]
    assert restored.startswith("manga-chat-llama-q4-v7-final-restore-"), restored
    own, variants, tags = described(restored)
    assert (own, tags) == (CONFIG_FIELDS, TAGS)
    assert unowned(variants["primary"]) == VARIANT_FIELDS
    assert variants["primary"]["ModelName"] == "manga-chat-llama-q4-v7-final-model"


def scale_out_during_the_first_step(count: int, stop: threading.Event) -> None:
    """Autoscaling's part: once the canary serves at its first step, raise the primary's instance count."""
    sagemaker = boto3.client("sagemaker")
    while not stop.is_set():
        if serving()["EndpointStatus"] == "InService" and 0 < wf.canary_weight() < 100:
            desired: Any = [{"VariantName": wf.PRIMARY, "DesiredInstanceCount": count}]
            sagemaker.update_endpoint_weights_and_capacities(
                EndpointName=wf.ENDPOINT, DesiredWeightsAndCapacities=desired
            )
            return
        time.sleep(0.1)


def test_a_promotion_during_a_scale_out_keeps_the_instances_serving_then(whole: wf.RolloutWorkflow) -> None:
    request = rollout_request(steps=[{"weight": 25, "bake_seconds": 4}, 100])
    stop = threading.Event()
    scaler = threading.Thread(target=scale_out_during_the_first_step, args=(5, stop), daemon=True)
    scaler.start()
    try:
        with wf.traffic(canary=HEALTHY, primary=HEALTHY):
            promoted = wf.wait(wf.start_rollout(request), timeout_s=90)
    finally:
        stop.set()
        scaler.join(timeout=5)

    assert promoted["status"] == "SUCCEEDED", promoted
    # The canary config was built at the start, from the 2 instances serving then ...
    assert described("manga-chat-llama-q4-v7-canary")[1]["primary"]["InitialInstanceCount"] == 2
    # ... the promoted one at promotion, after autoscaling had raised the primary to 5 and the rollout had grown it
    # to what served users (the 5 and the canary's 1, sized for 25 % of the 2 serving at the step): it keeps the 6.
    assert described("manga-chat-llama-q4-v7-final")[1]["primary"]["InitialInstanceCount"] == 6
    [primary] = serving()["ProductionVariants"]
    assert (primary["VariantName"], primary["CurrentInstanceCount"]) == (wf.PRIMARY, 6)


def test_a_canary_on_another_instance_type_than_the_primary_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deployed = wf.deploy()
    for key, value in deployed.environment.items():
        monkeypatch.setenv(key, value)
    # The primary runs ml.g6e.2xlarge; the canary asks for ml.g5.2xlarge, which fleet.yaml's canary_limits allow.
    create_whole_endpoint(instance_type="ml.g6e.2xlarge")
    with wf.handlers():
        refused = wf.wait(wf.start_rollout(rollout_request(steps=[100])), timeout_s=60)

    assert refused["status"] == "FAILED"
    # What the operator reads in the execution's cause.
    assert (
        "canary.instance_type: 'ml.g5.2xlarge' is not the instance type of the primary variant 'primary' "
        "(ml.g6e.2xlarge); the promoted variant keeps the primary's instance type, since SageMaker refuses to "
        "change the instance type of an autoscaled variant in an endpoint update. Run the canary on ml.g6e.2xlarge"
    ) in refused["cause"]
    assert wf.state_history(refused["executionArn"])[-1] == "Refused"
    sagemaker = boto3.client("sagemaker")
    assert [c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]] == [CONFIG]
    assert serving()["EndpointConfigName"] == CONFIG
