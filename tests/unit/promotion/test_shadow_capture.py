"""What a shadowed rollout captures, where, for how many users: the plan's shadow config, the prod cap on
sampling, and the candidate gate's prompts kept apart from users' requests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetops.config import FleetConfig, load_fleet_config
from fleetops.endpoint import EndpointSnapshot, VariantSnapshot
from fleetops.promotion.shadow import parse_capture
from fleetops.promotion.shadow_capture import CaptureDestination
from fleetops.promotion.shadow_spec import CONTROL_PLANE_INFERENCE_ID
from fleetops.rollout.checks import load_canary_checks
from fleetops.rollout.guardrails import StackLimits
from fleetops.rollout.plan import RolloutPlan
from fleetops.rollout.prepare import PrepareDeps, prepare_rollout
from fleetops.rollout.request_schema import RolloutInputError
from tests.conftest import REPO, load_event

SHIPPED = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
ROLE = "arn:aws:iam::123456789012:role/manga-llm-sagemaker-execution"
KEY = "arn:aws:kms:us-east-1:123456789012:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CAPTURE = CaptureDestination("manga-llm-captures", KEY)
STACK = StackLimits(
    execution_role_arn=ROLE,
    image_repository="123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm",
    artifact_bucket="manga-llm-artifacts",
    capture=CAPTURE,
)
VARIANTS = ({"name": "primary", "capacity_rps_per_instance": 4, "baseline_rps": 2, "floor": 2, "cap": 4},)
NOW = datetime(2026, 11, 21, 9, tzinfo=UTC)


def fleet(environment: str) -> FleetConfig:
    """The sample request's endpoint in ``environment`` under the shipped rollout_policy."""
    return FleetConfig.model_validate(
        {
            "version": "t",
            "rollout_policy": SHIPPED.model_dump()["rollout_policy"],
            "endpoints": [{"name": "manga-chat", "environment": environment, "variants": VARIANTS}],
        }
    )


def plan(shadow: dict[str, Any] | None, environment: str = "prod", stack: StackLimits = STACK) -> RolloutPlan:
    primary = VariantSnapshot(
        variant_name="primary", model_name="v6-model", instance_type="ml.g5.2xlarge", instance_count=2, weight=1.0
    )
    deps = PrepareDeps(
        read_endpoint=lambda name: EndpointSnapshot(
            endpoint_name=name, status="InService", endpoint_config_name="v6-config", variants=(primary,)
        ),
        read_pointer=lambda parameter: None,
        kill_switch_engaged=lambda: False,
        pointer_prefix="/stack/models",
        fleet=fleet(environment),
        checks=load_canary_checks(),
        stack=stack,
    )
    request = load_event("rollout_validate")["request"]
    request["model"].pop("execution_role_arn", None)
    return prepare_rollout(request | {"shadow": shadow}, NOW, deps)


def test_the_shadow_config_captures_into_the_capture_bucket_encrypted_with_the_capture_key() -> None:
    planned = plan({"sampling_percent": 20, "seconds": 1800})

    capture = planned.canary_data_capture
    assert capture is not None
    assert capture["KmsKeyId"] == KEY
    assert capture["DestinationS3Uri"] == f"s3://manga-llm-captures/shadow-capture/{planned.rollout_id}"
    assert capture["InitialSamplingPercentage"] == 20
    # Capture runs on a config of its own; the canary config the steps run on captures nothing.
    assert planned.shadow_endpoint_config_name == f"manga-chat-{planned.rollout_id}-shadow"
    assert planned.shadow_endpoint_config_name not in (
        planned.canary_endpoint_config_name,
        planned.final_endpoint_config_name,
    )
    # The shadow config is the canary config's copy with this capture; the canary config keeps production's.
    shadow = planned.shadow_config
    assert shadow is not None and shadow.data_capture == capture
    assert shadow.endpoint_config_name == planned.shadow_endpoint_config_name
    assert shadow.add == planned.canary_config.add and planned.canary_config.data_capture is None


def test_a_rollout_without_shadow_plans_no_capture() -> None:
    planned = plan(None)
    assert planned.canary_data_capture is None and planned.shadow_endpoint_config_name is None


def test_a_shadowed_rollout_on_a_stack_without_a_capture_bucket_is_refused_saying_so() -> None:
    stack = StackLimits(STACK.execution_role_arn, STACK.image_repository, STACK.artifact_bucket)
    with pytest.raises(RolloutInputError) as refused:
        plan({"sampling_percent": 10}, stack=stack)
    assert "shadow: the stack names no capture bucket and key" in str(refused.value)


def test_prod_refuses_sampling_above_the_fleet_cap_naming_the_limit_and_why() -> None:
    assert SHIPPED.rollout_floors("prod").max_shadow_sampling_percent == 20
    with pytest.raises(RolloutInputError) as refused:
        plan({"sampling_percent": 50})

    # What the operator reads in the rollout's Refused cause.
    assert (
        "shadow.sampling_percent: 50 % of live requests is above the limit of 20 % on a prod endpoint "
        "(fleet.yaml rollout_policy.prod.max_shadow_sampling_percent): captured requests are users' conversations"
    ) in str(refused.value)
    assert plan({"sampling_percent": 20}).canary_data_capture is not None
    assert plan({"sampling_percent": 100}, environment="dev").canary_data_capture is not None


def test_an_environment_without_a_policy_caps_sampling_at_the_strict_default() -> None:
    assert (
        FleetConfig.model_validate(
            {"version": "t", "endpoints": [{"name": "e", "environment": "prod", "variants": VARIANTS}]}
        )
        .rollout_floors("prod")
        .max_shadow_sampling_percent
        == 20
    )


def capture_line(question: str, inference_id: str | None = None) -> str:
    metadata = {"eventId": question} | ({"inferenceId": inference_id} if inference_id else {})
    chat = json.dumps({"messages": [{"role": "user", "content": question}]})
    return json.dumps(
        {
            "captureData": {
                "endpointInput": {"data": chat, "encoding": "JSON"},
                "endpointOutput": {"data": '{"choices": [{"message": {"content": "ok"}}]}', "encoding": "JSON"},
            },
            "eventMetadata": metadata,
        }
    )


def test_records_the_control_plane_sent_are_not_live_requests() -> None:
    lines = [
        capture_line("user question"),
        capture_line("gate prompt", f"{CONTROL_PLANE_INFERENCE_ID}5f0c"),
        capture_line("a user's own inference id", "checkout-42"),
    ]
    assert [c.event_id for c in parse_capture("\n".join(lines))] == ["user question", "a user's own inference id"]
