"""The configs a rollout builds copy everything and override only what the rollout owns, checked against botocore's
real SageMaker API model (botocore's Stubber validates every request and answer against it; no network).

Here are the fields the emulator (moto 5.2.5) drops or cannot serve: ``ExplainerConfig``,
``ShadowProductionVariants`` and a serverless variant; the workflow tests on the emulator check the rest end to end
(``tests/integration/workflows/test_promotion_keeps_config.py``).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber

from fleetops.rollout.config_copy import (
    DESCRIBED_ONLY,
    OWNED_CONFIG_FIELDS,
    OWNED_VARIANT_FIELDS,
    ConfigCopyError,
    ConfigPlan,
    VariantPlan,
    build_config,
)
from fleetops.rollout.endpoint_configs import EndpointConfigs
from fleetops.rollout.restore_config import restore_plan

HOSTING = {
    "InferenceAmiVersion": "al2-ami-sagemaker-inference-gpu-3-1",
    "ContainerStartupHealthCheckTimeoutInSeconds": 900,
    "ModelDataDownloadTimeoutInSeconds": 600,
}
ARN = "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/manga-chat-v6-config"
PRIMARY: dict[str, Any] = {
    "VariantName": "primary",
    "ModelName": "manga-chat-v6-model",
    "InstanceType": "ml.g5.2xlarge",
    "InitialInstanceCount": 2,
    "InitialVariantWeight": 1.0,
    "VolumeSizeInGB": 200,
    "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
    "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 8},
    "CoreDumpConfig": {"DestinationS3Uri": "s3://manga-llm-ops/core-dumps/"},
    "EnableSSMAccess": True,
    **HOSTING,
}
SERVERLESS: dict[str, Any] = {
    "VariantName": "fallback",
    "ModelName": "manga-chat-v6-small",
    "InitialVariantWeight": 0.0,
    "ServerlessConfig": {"MemorySizeInMB": 6144, "MaxConcurrency": 5},
}
SHADOW: dict[str, Any] = PRIMARY | {"VariantName": "shadow-v6b", "ModelName": "manga-chat-v6b-model"}
#: What the rollout does not own on the config: every one must be copied.
CONFIG_FIELDS: dict[str, Any] = {
    "DataCaptureConfig": {
        "EnableCapture": True,
        "InitialSamplingPercentage": 2,
        "DestinationS3Uri": "s3://manga-llm-ops/production-capture/",
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
    },
    "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "AsyncInferenceConfig": {"OutputConfig": {"S3OutputPath": "s3://manga-llm-ops/async/"}},
    "ExplainerConfig": {"ClarifyExplainerConfig": {"ShapConfig": {"ShapBaselineConfig": {"MimeType": "text/csv"}}}},
    "ShadowProductionVariants": [SHADOW],
}
SOURCE: dict[str, Any] = {
    "EndpointConfigName": "manga-chat-v6-config",
    "EndpointConfigArn": ARN,
    "CreationTime": datetime(2026, 11, 21, 9, 0, tzinfo=UTC),
    "ProductionVariants": [PRIMARY, SERVERLESS],
    **CONFIG_FIELDS,
}
TAGS = [{"Key": "team", "Value": "manga-assistant"}, {"Key": "cost-center", "Value": "ml-4711"}]
#: The endpoint now: autoscaling is taking the primary from 3 to 5 instances; the shadow variant runs 2.
LIVE: dict[str, Any] = {
    "EndpointName": "manga-chat",
    "EndpointArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/manga-chat",
    "EndpointConfigName": "manga-chat-v6-config",
    "EndpointStatus": "InService",
    "CreationTime": datetime(2026, 11, 21, 9, 0, tzinfo=UTC),
    "LastModifiedTime": datetime(2026, 11, 21, 18, 0, tzinfo=UTC),
    "ProductionVariants": [
        {"VariantName": "primary", "CurrentWeight": 1.0, "CurrentInstanceCount": 3, "DesiredInstanceCount": 5},
        {"VariantName": "fallback", "CurrentWeight": 0.0},
    ],
    "ShadowProductionVariants": [{"VariantName": "shadow-v6b", "CurrentInstanceCount": 2}],
}

CANARY = ConfigPlan(
    endpoint_name="manga-chat",
    endpoint_config_name="manga-chat-v7-canary",
    source_config_name="manga-chat-v6-config",
    copy_variants=True,
    add=(
        VariantPlan(
            variant_name="canary",
            copy_of="primary",
            model_name="manga-chat-v7-model",
            instance_count=1,
            weight=0.0,
            own_capacity=True,
        ),
    ),
    hosting=HOSTING,
)
FINAL = ConfigPlan(
    endpoint_name="manga-chat",
    endpoint_config_name="manga-chat-v7-final",
    source_config_name="manga-chat-v6-config",
    copy_variants=False,
    add=(
        VariantPlan(
            variant_name="primary", copy_of="primary", model_name="manga-chat-v7-final-model", min_instance_count=2,
            weight=1.0,
        ),
    ),
    hosting=HOSTING,
)  # fmt: skip
#: What a rollback to v6's config creates (fleetops.rollout.restore_config), at 18:05 UTC.
RESTORED = restore_plan("manga-chat", "manga-chat-v6-config", datetime(2026, 11, 21, 18, 5, tzinfo=UTC))
#: The shadow variant keeps its fields; its count is the live one.
SHADOW_NOW = [SHADOW | {"InitialInstanceCount": 2}]


def created(plan: ConfigPlan, expected: dict[str, Any]) -> dict[str, Any]:
    """Run the adapter against botocore's stubbed client: every call and answer checked against the API model."""
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response(
            "describe_endpoint_config", copy.deepcopy(SOURCE), {"EndpointConfigName": plan.source_config_name}
        )
        stub.add_response("describe_endpoint", copy.deepcopy(LIVE), {"EndpointName": "manga-chat"})
        stub.add_response("list_tags", {"Tags": TAGS}, {"ResourceArn": ARN})
        stub.add_response("create_endpoint_config", {"EndpointConfigArn": ARN}, expected)
        request = EndpointConfigs(client=client).create(plan)
        stub.assert_no_pending_responses()
    return request


def test_the_promoted_config_keeps_every_field_and_tag_and_the_instances_serving_at_promotion() -> None:
    created(
        FINAL,
        {
            "EndpointConfigName": "manga-chat-v7-final",
            # the primary's own fields, the new model, and the 5 instances autoscaling is bringing up now
            "ProductionVariants": [
                PRIMARY
                | {"ModelName": "manga-chat-v7-final-model", "InitialInstanceCount": 5, "InitialVariantWeight": 1.0}
            ],
            **CONFIG_FIELDS,
            "ShadowProductionVariants": SHADOW_NOW,
            "Tags": TAGS,
        },
    )


def test_the_canary_config_copies_every_variant_and_adds_the_canary_without_the_primarys_scaling_bounds() -> None:
    canary = {k: v for k, v in PRIMARY.items() if k != "ManagedInstanceScaling"} | {
        "VariantName": "canary",
        "ModelName": "manga-chat-v7-model",
        "InitialInstanceCount": 1,
        "InitialVariantWeight": 0.0,
    }
    created(
        CANARY,
        {
            "EndpointConfigName": "manga-chat-v7-canary",
            # the serverless variant stays serverless (no instance count), with fleet.yaml's hosting
            "ProductionVariants": [PRIMARY | {"InitialInstanceCount": 5}, SERVERLESS | HOSTING, canary],
            **CONFIG_FIELDS,
            "ShadowProductionVariants": SHADOW_NOW,
            "Tags": TAGS,
        },
    )


def test_a_restored_config_keeps_the_configs_weights_and_fields_and_the_live_counts() -> None:
    created(
        RESTORED,
        {
            "EndpointConfigName": "manga-chat-v6-config-restore-261121180500",
            # the config as it was (its weights and hosting fields), with the 5 instances the primary runs now
            "ProductionVariants": [PRIMARY | {"InitialInstanceCount": 5}, SERVERLESS],
            **CONFIG_FIELDS,
            "ShadowProductionVariants": SHADOW_NOW,
            "Tags": TAGS,
        },
    )


def test_a_field_sagemaker_adds_later_is_copied_too() -> None:
    source = copy.deepcopy(SOURCE)
    source["SomeFutureConfigField"] = {"Mode": "On"}
    source["ProductionVariants"][0]["SomeFutureVariantField"] = 7
    built = build_config(FINAL, source, TAGS, LIVE)
    assert built["SomeFutureConfigField"] == {"Mode": "On"}
    assert built["ProductionVariants"][0]["SomeFutureVariantField"] == 7


def test_a_floor_of_the_plans_count_holds_when_the_baseline_was_scaled_in_at_weight_zero() -> None:
    scaled_in = copy.deepcopy(LIVE)
    scaled_in["ProductionVariants"][0] |= {"CurrentInstanceCount": 1, "DesiredInstanceCount": 1}
    assert build_config(FINAL, SOURCE, TAGS, scaled_in)["ProductionVariants"][0]["InitialInstanceCount"] == 2


def test_a_restored_config_never_runs_fewer_than_its_own_count_and_a_variant_not_serving_keeps_it() -> None:
    """The primary serves 1 instance now (its config said 2); a second instance variant of the config does not
    serve at all: the copy runs 2 and 3, the config's counts."""
    spare = PRIMARY | {"VariantName": "spare", "InitialInstanceCount": 3, "InitialVariantWeight": 0.0}
    source = copy.deepcopy(SOURCE) | {"ProductionVariants": [PRIMARY, spare]}
    scaled_in = copy.deepcopy(LIVE)
    scaled_in["ProductionVariants"][0] |= {"CurrentInstanceCount": 1, "DesiredInstanceCount": 1}
    scaled_in["ShadowProductionVariants"][0]["CurrentInstanceCount"] = 1
    built = build_config(RESTORED, source, TAGS, scaled_in)
    assert [(v["VariantName"], v["InitialInstanceCount"]) for v in built["ProductionVariants"]] == [
        ("primary", 2),
        ("spare", 3),
    ]
    assert built["ShadowProductionVariants"][0]["InitialInstanceCount"] == 2
    # Without the floor (a rollout's copies), the live count is the count.
    live_only = RESTORED.model_copy(update={"source_count_floor": False})
    assert build_config(live_only, source, TAGS, scaled_in)["ProductionVariants"][0]["InitialInstanceCount"] == 1


def test_reserved_tags_are_not_copied_and_empty_answers_are_left_out() -> None:
    source = {**SOURCE, "DataCaptureConfig": {}, "KmsKeyId": None}
    built = build_config(FINAL, source, [*TAGS, {"Key": "aws:cloudformation:stack-name", "Value": "x"}], LIVE)
    assert built["Tags"] == TAGS
    assert "DataCaptureConfig" not in built and "KmsKeyId" not in built


def test_a_variant_the_source_config_lacks_is_refused_by_name() -> None:
    plan = FINAL.model_copy(update={"add": (VariantPlan(variant_name="primary", copy_of="blue"),)})
    with pytest.raises(ConfigCopyError) as refused:
        build_config(plan, SOURCE, TAGS, LIVE)
    assert str(refused.value) == (
        "endpoint config 'manga-chat-v6-config' has no variant 'blue' to copy for 'primary' "
        "(it has ['fallback', 'primary']); nothing was created"
    )


def test_what_describe_answers_create_takes_but_the_described_only_fields() -> None:
    """Copying the answer is safe: botocore's model says CreateEndpointConfig takes every other field of it."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    described = set(model.shape_for("DescribeEndpointConfigOutput").members)  # type: ignore[attr-defined]
    takes = set(model.shape_for("CreateEndpointConfigInput").members)  # type: ignore[attr-defined]
    assert described - DESCRIBED_ONLY <= takes
    assert DESCRIBED_ONLY - {"ResponseMetadata"} <= described
    assert set(OWNED_CONFIG_FIELDS) <= takes
    # The variants are one shape both ways, so a variant copies field for field.
    variant = model.shape_for("ProductionVariant")
    assert set(OWNED_VARIANT_FIELDS) <= set(variant.members)  # type: ignore[attr-defined]
