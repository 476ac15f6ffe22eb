"""Rollout requests and plans: validation, weights per step, promotion variant, polling schedule."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetops.endpoint import EndpointSnapshot, VariantSnapshot
from fleetops.model_contract import ModelContract
from fleetops.rollout.in_service import InServiceSettings
from fleetops.rollout.plan import EndpointNotReadyForRolloutError, RolloutPlan, build_plan
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.prepare import with_stack_engine_knobs
from fleetops.rollout.request_schema import RolloutInputError, parse_request
from fleetops.tables import REGISTRY_PK, REGISTRY_SK
from tests.conftest import load_event

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
VOICE = {"version": "v3", "path": "adapters/shonen_voice/v3", "sha256": "c" * 64}


def request(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = load_event("rollout_validate")["request"]
    return base | changes


def snapshot(status: str = "InService", variants: tuple[VariantSnapshot, ...] | None = None) -> EndpointSnapshot:
    primary = VariantSnapshot(
        variant_name="primary", model_name="v6-model", instance_type="ml.g5.2xlarge", instance_count=3, weight=1.0
    )
    return EndpointSnapshot(
        endpoint_name="manga-chat", status=status, endpoint_config_name="v6-config", variants=variants or (primary,)
    )


def plan(**changes: Any) -> RolloutPlan:
    return build_plan(parse_request(request(**changes)), snapshot(), NOW, "/stack/models/manga-chat", None)


def test_the_sample_request_plans_five_steps_with_approval_at_50_and_100() -> None:
    p = plan()
    assert [s.weight for s in p.steps] == [5, 25, 50, 75, 100]
    assert [s.approval for s in p.steps] == [False, False, True, False, True]
    assert all(s.bake_seconds == 900 for s in p.steps)
    assert p.step_count == 5 and p.lease_holder == "canary_rollout/llama-q4-v7"


def test_each_step_moves_traffic_from_the_current_variants_to_the_canary() -> None:
    weights = {s.weight: {w["VariantName"]: w["DesiredWeight"] for w in s.weights} for s in plan().steps}
    assert weights[5] == {"primary": 95.0, "canary": 5.0}
    assert weights[100] == {"primary": 0.0, "canary": 100.0}


def test_the_canary_config_copies_the_current_config_and_adds_the_canary_at_weight_zero() -> None:
    p = plan()
    config = p.canary_config
    assert (config.source_config_name, config.endpoint_config_name) == ("v6-config", p.canary_endpoint_config_name)
    assert config.copy_variants and config.copied_weights == "live"
    [canary] = config.add
    assert (canary.variant_name, canary.copy_of, canary.weight) == ("canary", "primary", 0.0)
    assert canary.model_name == p.model_name == "manga-chat-llama-q4-v7-model"
    # The canary's capacity is the request's, not the primary's managed scaling bounds.
    assert canary.instance_count == 1 and canary.own_capacity


def test_promotion_keeps_the_baseline_variant_and_reads_its_count_when_promoting() -> None:
    config = plan().final_config
    assert (config.source_config_name, config.endpoint_config_name) == ("v6-config", "manga-chat-llama-q4-v7-final")
    assert not config.copy_variants
    [final] = config.add
    assert (final.variant_name, final.copy_of, final.model_name) == (
        "primary",
        "primary",
        "manga-chat-llama-q4-v7-final-model",
    )
    # The count is read when the config is built; the plan's 3 is only a floor.
    assert (final.instance_count, final.min_instance_count, final.weight) == (None, 3, 1.0)
    # fleet.yaml's hosting defaults: the newest GPU AMI, and the start-up and download timeouts
    assert config.hosting == {
        "InferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1",
        "ContainerStartupHealthCheckTimeoutInSeconds": 1200,
        "ModelDataDownloadTimeoutInSeconds": 1200,
    }


def test_a_canary_on_another_instance_type_than_the_primary_is_refused_with_the_reason() -> None:
    with pytest.raises(RolloutInputError) as refused:
        plan(canary={"instance_type": "ml.g6e.2xlarge"})
    # What the operator reads: which type, the primary's, why, and what to do instead.
    assert str(refused.value) == (
        "invalid rollout request: canary.instance_type: 'ml.g6e.2xlarge' is not the instance type of the primary "
        "variant 'primary' (ml.g5.2xlarge); the promoted variant keeps the primary's instance type, since SageMaker "
        "refuses to change the instance type of an autoscaled variant in an endpoint update. Run the canary on "
        "ml.g5.2xlarge (a new instance type is a change of its own: deregister the scalable target, update the "
        "endpoint, register it again). Nothing was changed."
    )


def test_adapters_reach_the_container_as_lora_modules_and_weights_as_model_data() -> None:
    container = plan().create_model["PrimaryContainer"]
    assert container["Environment"]["LORA_MODULES"] == (
        "general_support=adapters/general_support/v1 jp_style=adapters/jp_style/v2 "
        "manga_domain=adapters/manga_domain/v3 shonen_voice=adapters/shonen_voice/v3"
    )
    assert container["ModelDataUrl"].endswith("model.tar.gz")


def test_each_model_carries_the_contract_for_the_variant_it_serves() -> None:
    p = plan()
    canary = ModelContract.from_environment(p.create_model["PrimaryContainer"]["Environment"])
    final = ModelContract.from_environment(p.create_final_model["PrimaryContainer"]["Environment"])
    assert (canary.endpoint_name, canary.variant_name, canary.model_version) == ("manga-chat", "canary", "v7")
    # After promotion the new model serves the baseline variant: its metrics must carry that name.
    assert (final.endpoint_name, final.variant_name, final.model_version) == ("manga-chat", "primary", "v7")
    assert canary.adapters == final.adapters and canary.engine == final.engine
    assert canary.engine.max_model_len == 4096 and canary.engine.quantization == "awq"
    assert p.create_final_model["PrimaryContainer"]["Image"] == p.create_model["PrimaryContainer"]["Image"]
    assert p.new_pointer.sagemaker_model == p.final_model_name == "manga-chat-llama-q4-v7-final-model"


def test_without_adapters_the_model_leaves_the_image_default_and_sets_no_lora_modules() -> None:
    model = request()["model"] | {"adapters": None}
    assert "LORA_MODULES" not in plan(model=model).create_model["PrimaryContainer"]["Environment"]


@pytest.mark.parametrize(
    ("model_changes", "message"),
    [
        ({"environment": {"MODEL_VERSION": "v9"}}, "which the rollout writes itself"),
        ({"environment": {"SM_VLLM_MAX_NUM_SEQS": "8"}}, "which the rollout writes itself"),
        ({"adapters": {"shonen_voice": VOICE | {"path": "s3://bucket/adapters/voice/"}}}, "relative path inside"),
        ({"adapters": {"shonen_voice": VOICE | {"path": "../../etc"}}}, "relative path inside the model"),
        ({"engine": {"max_num_seq": 8}}, "model.engine.max_num_seq"),
        ({"engine": {"max_num_seqs": "lots"}}, "model.engine.max_num_seqs"),
    ],
)
def test_a_model_that_breaks_the_contract_is_refused_before_anything_changes(
    model_changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(RolloutInputError, match=message):
        parse_request(request(model=request()["model"] | model_changes))


def test_the_stack_max_num_seqs_reaches_every_model_and_a_different_one_is_refused() -> None:
    parsed = with_stack_engine_knobs(parse_request(request()), 64)
    p = build_plan(parsed, snapshot(), NOW, "/stack/models/manga-chat", None)
    for model in (p.create_model, p.create_final_model):
        assert model["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_NUM_SEQS"] == "64"
    asking = parse_request(request(model=request()["model"] | {"engine": {"max_num_seqs": 128}}))
    with pytest.raises(RolloutInputError, match="differs from the stack's MaxNumSeqs 64"):
        with_stack_engine_knobs(asking, 64)


def test_pointer_and_registry_row_name_the_new_version_and_remember_the_previous_config() -> None:
    current = Pointer(model="manga-llama", version="v6", sagemaker_model="m6", endpoint_config_name="v6-config")
    p = build_plan(parse_request(request()), snapshot(), NOW, "/stack/models/manga-chat", current)
    assert (p.new_pointer.version, p.new_pointer.previous_version) == ("v7", "v6")
    assert p.new_pointer.previous_endpoint_config_name == "v6-config"
    assert Pointer.model_validate_json(p.previous_pointer_json) == current
    assert p.registry_item[REGISTRY_PK] == {"S": "manga-llama"}
    assert p.registry_item[REGISTRY_SK] == {"S": p.new_pointer.release_key()}
    assert p.registry_item[REGISTRY_SK]["S"].startswith("v7+adapters-")
    assert p.registry_item["base_version"] == {"S": "v7"}


def test_the_lease_outlives_every_bake_and_approval_the_plan_can_take() -> None:
    p = plan()
    worst = 2 * 86400 + 5 * 900 * 3
    assert p.lease_expires_at - p.now_epoch > worst
    assert p.now_epoch == int(NOW.timestamp())


def test_polling_waits_double_up_to_the_cap_and_cover_the_timeout() -> None:
    assert InServiceSettings(first_wait_seconds=30, max_wait_seconds=120, timeout_seconds=600).waits() == [
        30, 60, 120, 120, 120, 120, 120
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"steps": [25, 5, 100]}, "steps must strictly increase"),
        ({"steps": [5, 50]}, "the last step must be 100"),
        ({"approval_steps": [30]}, "approval_steps [30] are not steps"),
        ({"endpoint_name": "e" * 30, "rollout_id": "x" * 40}, "too long for SageMaker names"),
        ({"rollout_id": "has space"}, "rollout_id: String should match pattern"),
        ({"approval": {"timeout_seconds": 60, "heartbeat_seconds": 120}}, "heartbeat_seconds must not exceed"),
    ],
)
def test_bad_requests_are_refused_with_the_problem_named(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RolloutInputError, match="invalid rollout request") as raised:
        parse_request(request(**changes))
    assert message in str(raised.value)


def test_every_field_problem_is_listed_at_once() -> None:
    bad = request(canary={"instance_type": "g5", "instance_count": 0}, bake_seconds=-1)
    with pytest.raises(RolloutInputError) as raised:
        parse_request(bad)
    text = str(raised.value)
    assert "canary.instance_type" in text and "canary.instance_count" in text and "bake_seconds" in text


def test_an_endpoint_that_is_updating_or_already_has_a_canary_cannot_start_a_rollout() -> None:
    parsed = parse_request(request())
    with pytest.raises(EndpointNotReadyForRolloutError, match="is Updating"):
        build_plan(parsed, snapshot(status="Updating"), NOW, "/p", None)
    canary = VariantSnapshot(
        variant_name="canary", model_name="x", instance_type="ml.g5.2xlarge", instance_count=1, weight=0
    )
    with pytest.raises(EndpointNotReadyForRolloutError, match="roll back first"):
        build_plan(parsed, snapshot(variants=(*snapshot().variants, canary)), NOW, "/p", None)
