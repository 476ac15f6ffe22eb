"""Validate's guardrails: the floors of the endpoint's environment and the stack's closed deploy payload."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, get_args

import pytest

from fleetops.config import FleetConfig, RolloutFloors, load_fleet_config
from fleetops.endpoint import EndpointSnapshot, VariantSnapshot
from fleetops.model_contract import ALLOWED_ENVIRONMENT, REFUSED_ENVIRONMENT
from fleetops.rollout.checks import Compare, load_canary_checks
from fleetops.rollout.guardrails import LOOSER, StackLimits, apply_guardrails
from fleetops.rollout.prepare import PrepareDeps, prepare_rollout
from fleetops.rollout.request_schema import RolloutInputError, RolloutRequest, parse_request
from tests.conftest import REPO, load_event

SHIPPED = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
CHECKS = load_canary_checks()
ROLE = "arn:aws:iam::123456789012:role/manga-llm-sagemaker-execution"
REPOSITORY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm"
STACK = StackLimits(execution_role_arn=ROLE, image_repository=REPOSITORY, artifact_bucket="manga-llm-artifacts")
VARIANTS = ({"name": "primary", "capacity_rps_per_instance": 4, "baseline_rps": 2, "floor": 2, "cap": 4},)


def fleet(policy: dict[str, Any] | None = None) -> FleetConfig:
    """The sample request's endpoint as prod and a dev one, under the shipped rollout_policy (or ``policy``)."""
    return FleetConfig.model_validate(
        {
            "version": "t",
            "rollout_policy": SHIPPED.model_dump()["rollout_policy"] if policy is None else policy,
            "endpoints": [
                {"name": "manga-chat", "environment": "prod", "variants": VARIANTS},
                {"name": "manga-chat-dev", "environment": "dev", "variants": VARIANTS},
            ],
        }
    )


def request(**changes: Any) -> RolloutRequest:
    return parse_request(load_event("rollout_validate")["request"] | changes)


def model(**changes: Any) -> dict[str, Any]:
    return dict(load_event("rollout_validate")["request"]["model"]) | changes


def refused(req: RolloutRequest, stack: StackLimits = STACK, config: FleetConfig | None = None) -> str:
    with pytest.raises(RolloutInputError, match="rollout request refused") as raised:
        apply_guardrails(req, config or fleet(), CHECKS, stack)
    return str(raised.value)


def test_the_sample_request_meets_the_shipped_prod_floors_and_gets_the_stack_role() -> None:
    guarded = apply_guardrails(request(model=model(execution_role_arn=None)), fleet(), CHECKS, STACK)
    assert guarded.request.model.execution_role_arn == ROLE
    assert guarded.floors == SHIPPED.rollout_floors("prod") and guarded.floors.network_isolation


def test_the_shipped_fleet_requires_a_person_to_approve_every_prod_promotion() -> None:
    assert 100 in SHIPPED.rollout_floors("prod").approval_steps
    assert SHIPPED.rollout_floors("prod").min_bake_seconds >= 300


@pytest.mark.parametrize(
    "changes",
    [
        {"approval_steps": []},
        {"approval_steps": [50]},
        {"steps": [5, 25, {"weight": 100, "approval": False}], "approval_steps": [100]},
    ],
)
def test_a_prod_request_cannot_remove_the_promotion_approval(changes: dict[str, Any]) -> None:
    assert "approval_steps: steps [100] must ask a person on a prod endpoint" in refused(request(**changes))


def test_a_request_may_add_approvals_and_a_dev_endpoint_needs_none() -> None:
    every = apply_guardrails(request(approval_steps=[5, 25, 50, 75, 100]), fleet(), CHECKS, STACK)
    assert [s.weight for s in every.request.step_specs() if s.approval] == [5, 25, 50, 75, 100]
    assert every.floors == SHIPPED.rollout_floors("prod")

    dev = apply_guardrails(request(endpoint_name="manga-chat-dev", approval_steps=[]), fleet(), CHECKS, STACK)
    assert not any(s.approval for s in dev.request.step_specs())
    assert dev.floors == SHIPPED.rollout_floors("dev") and dev.floors.approval_steps == ()


def test_an_environment_without_a_policy_gets_the_strict_defaults() -> None:
    text = refused(request(endpoint_name="manga-chat-dev", approval_steps=[]), config=fleet(policy={}))
    assert "steps [100] must ask a person on a dev endpoint" in text
    assert RolloutFloors().approval_steps == (100,)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"bake_seconds": 0}, "bake_seconds: step 5 bakes 0 s, below the floor of 600 s"),
        (
            {"steps": [5, {"weight": 100, "bake_seconds": 60}], "approval_steps": [100]},
            "step 100 bakes 60 s, below the floor of 600 s",
        ),
        ({"bake_seconds": 30 * 86400}, "bake_seconds: step 5 bakes 2592000 s, above the limit of 21600 s"),
        ({"approval": {"timeout_seconds": 30 * 86400}}, "approval.timeout_seconds: 2592000 is above the limit"),
        (
            {"approval": {"timeout_seconds": 3 * 86400, "heartbeat_seconds": 2 * 86400}},
            "approval.heartbeat_seconds: 172800 is above the limit of 86400",
        ),
        ({"max_extensions": 10}, "max_extensions: 10 is above the limit of 3"),
    ],
)
def test_bakes_approvals_and_extensions_stay_within_the_environment_bounds(
    changes: dict[str, Any], problem: str
) -> None:
    assert problem in refused(request(**changes))


def test_a_request_may_bake_longer_up_to_the_limit() -> None:
    guarded = apply_guardrails(request(bake_seconds=21600), fleet(), CHECKS, STACK)
    assert guarded.floors.max_bake_seconds == 21600
    assert {s.bake_seconds for s in guarded.request.step_specs()} == {21600}


@pytest.mark.parametrize(
    ("thresholds", "check", "limit", "asked"),
    [
        ({"min_requests": 20}, "requests", "200", "20"),
        ({"max_error_rate": 0.01}, "error-rate", "0.005", "0.01"),
        ({"max_ttft_p95_ms": 800}, "ttft-slo", "500", "800"),
        ({"max_latency_p95_ms": 20000}, "latency-slo", "10000", "20000"),
        ({"max_error_rate_increase": 0.05}, "error-rate-increase", "0.001", "0.05"),
        ({"max_latency_regression": 1.0}, "p95-latency", "0.05", "1.0"),
        ({"max_oom": 3}, "oom", "0", "3"),
    ],
)
def test_a_looser_threshold_is_refused_naming_the_check_its_limit_and_the_request(
    thresholds: dict[str, Any], check: str, limit: str, asked: str
) -> None:
    text = refused(request(thresholds=thresholds))
    assert f"{asked} is looser than check {check!r}" in text and f"declared limit {limit}" in text, text


def test_tighter_thresholds_pass() -> None:
    tight = {
        "min_requests": 1000,
        "max_error_rate": 0.001,
        "max_latency_regression": 0.05,
        "max_ttft_p95_ms": 400,
        "max_latency_p95_ms": 8000,
        "max_oom": 0,
    }
    guarded = apply_guardrails(request(thresholds=tight), fleet(), CHECKS, STACK)
    assert guarded.request.thresholds.model_dump(exclude_none=True) == tight


def test_an_endpoint_not_listed_for_the_stack_environment_is_refused_naming_the_environment() -> None:
    dev_stack = StackLimits(ROLE, REPOSITORY, "manga-llm-artifacts", environment_name="dev")
    assert "'manga-chat' is not an endpoint of the dev environment in fleet.yaml" in refused(request(), dev_stack)
    unlisted = refused(request(endpoint_name="manga-chat-staging", bake_seconds=1))
    assert "bake_seconds" not in unlisted  # an unlisted endpoint has no environment whose floors could apply
    assert "'manga-chat-staging' is not an endpoint of fleet.yaml (listed: ['manga-chat', 'manga-chat-dev'" in unlisted


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        (
            {"execution_role_arn": "arn:aws:iam::123456789012:role/my-sagemaker-admin"},
            "is not the stack's model execution role",
        ),
        ({"image_uri": "evil.example.com/manga-llm:v7"}, "is not an image of the stack's repository"),
        ({"image_uri": f"{REPOSITORY}-other:v7"}, "is not an image of the stack's repository"),
        ({"image_uri": f"{REPOSITORY}@sha256:abc"}, "is not an image of the stack's repository"),
        ({"model_data_url": "s3://someone-elses-bucket/model.tar.gz"}, "outside the stack's model artifact bucket"),
        ({"model_data_url": "s3://manga-llm-artifacts-evil/model.tar.gz"}, "outside the stack's model artifact"),
        ({"environment": {"BEDROCK_FALLBACK_MODEL_ID": "anthropic.claude"}}, "runs network-isolated here"),
    ],
)
def test_the_deploy_payload_is_closed_to_what_the_stack_allows(changes: dict[str, Any], problem: str) -> None:
    assert problem in refused(request(model=model(**changes)))


def test_the_stack_repository_by_digest_and_its_bucket_pass_and_a_dev_endpoint_may_use_a_tag() -> None:
    for endpoint, image in (("manga-chat", f"{REPOSITORY}@sha256:{'a' * 64}"), ("manga-chat-dev", f"{REPOSITORY}:v7")):
        changes = {"endpoint_name": endpoint, "model": model(image_uri=image)}
        guarded = apply_guardrails(request(**changes), fleet(), CHECKS, STACK)
        assert guarded.request.model.image_uri == image
        assert guarded.request.model.model_data_url == "s3://manga-llm-artifacts/models/manga-llama/v7/model.tar.gz"
        assert guarded.request.model.execution_role_arn == ROLE


def test_a_prod_request_naming_the_image_by_tag_is_refused_saying_to_pass_its_digest() -> None:
    # A tag can be re-pointed after the gates and the approver saw the release; SageMaker pulls at every launch.
    text = refused(request(model=model(image_uri=f"{REPOSITORY}:v7-awq")))

    assert f"model.image_uri: '{REPOSITORY}:v7-awq' names a tag, which can be re-pointed to another image" in text
    assert f"a prod endpoint deploys images by digest: pass {REPOSITORY}@sha256:<64 hex digits>" in text


@pytest.mark.parametrize(
    ("canary", "problem"),
    [
        (
            {"instance_type": "ml.p5.48xlarge"},
            "canary.instance_type: 'ml.p5.48xlarge' is not allowed on endpoint 'manga-chat-prod'; allowed: "
            "['ml.g5.2xlarge', 'ml.g6e.2xlarge'] (fleet.yaml: the endpoint's canary_limits.instance_types)",
        ),
        (
            {"instance_type": "ml.g5.2xlarge", "instance_count": 13},
            "canary.instance_count: 13 is above the max of 12 on endpoint 'manga-chat-prod' (fleet.yaml: the "
            "endpoint's canary_limits.max_instance_count)",
        ),
    ],
)
def test_a_canary_outside_the_shipped_endpoints_limits_is_refused_naming_them(
    canary: dict[str, Any], problem: str
) -> None:
    assert problem in refused(request(endpoint_name="manga-chat-prod", canary=canary), config=SHIPPED)


def test_the_shipped_canary_limits_pass_and_every_shipped_endpoint_lists_its_own() -> None:
    for canary in ({"instance_type": "ml.g6e.2xlarge", "instance_count": 2}, {"instance_type": "ml.g5.2xlarge"}):
        guarded = apply_guardrails(request(endpoint_name="manga-chat-prod", canary=canary), SHIPPED, CHECKS, STACK)
        assert guarded.request.canary.instance_type == canary["instance_type"]
    assert all(e.canary_limits.instance_types for e in SHIPPED.endpoints)


def test_without_canary_limits_a_canary_runs_on_the_variants_type_and_one_instance() -> None:
    # fleet() lists no canary_limits: the variants' type (the schema's ml.g5.2xlarge) and one instance.
    text = refused(request(canary={"instance_type": "ml.g5.48xlarge", "instance_count": 2}))

    assert (
        "canary.instance_type: 'ml.g5.48xlarge' is not allowed on endpoint 'manga-chat'; allowed: ['ml.g5.2xlarge'] "
        "(fleet.yaml: no canary_limits, so the endpoint's variants' types)"
    ) in text
    assert "canary.instance_count: 2 is above the max of 1 on endpoint 'manga-chat'" in text


def test_canary_limits_naming_no_sagemaker_instance_type_fail_the_fleet_file() -> None:
    endpoint = {"name": "e", "variants": VARIANTS, "canary_limits": {"instance_types": ["g5.2xlarge"]}}
    with pytest.raises(ValueError, match=r"instance_types \['g5.2xlarge'\] are not SageMaker instance types"):
        FleetConfig.model_validate({"version": "t", "endpoints": [endpoint]})


def test_the_bedrock_fallback_is_allowed_where_the_environment_turns_isolation_off() -> None:
    open_dev = SHIPPED.model_dump()["rollout_policy"] | {"dev": {"approval_steps": [], "network_isolation": False}}
    env = {"BEDROCK_FALLBACK_MODEL_ID": "anthropic.claude"}
    req = request(endpoint_name="manga-chat-dev", model=model(environment=env))
    assert not apply_guardrails(req, fleet(open_dev), CHECKS, STACK).floors.network_isolation


def test_the_shipped_fleet_gates_every_environment_and_a_gated_rollout_must_name_its_artifact() -> None:
    assert SHIPPED.rollout_floors("prod").pre_traffic_gates and SHIPPED.rollout_floors("dev").pre_traffic_gates
    assert RolloutFloors().pre_traffic_gates  # an environment without a policy is gated too

    problems = refused(request(model=model(model_data_url=None)))

    assert "model.model_data_url: required here (fleet.yaml rollout_policy pre_traffic_gates)" in problems
    assert "weights baked into an image cannot be checked" in problems


@pytest.mark.parametrize(
    "name", ["VLLM_SERVER_DEV_MODE", "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "VLLM_PLUGINS", "GATEWAY_CONFIG"]
)
def test_environment_variables_that_open_engine_routes_or_load_code_are_refused_by_name(name: str) -> None:
    with pytest.raises(RolloutInputError, match=f"environment {name} is refused: {REFUSED_ENVIRONMENT[name][:20]}"):
        request(model=model(environment={name: "1"}))


def test_an_environment_variable_not_on_the_allow_list_is_refused_listing_the_allowed_ones() -> None:
    with pytest.raises(RolloutInputError, match=r"environment SOME_FLAG is not allowed \(allowed: BEDROCK"):
        request(model=model(environment={"SOME_FLAG": "1"}))
    assert request(model=model(environment={"VLLM_LOGGING_LEVEL": "DEBUG"})).model.environment
    assert not set(ALLOWED_ENVIRONMENT) & set(REFUSED_ENVIRONMENT)


@pytest.mark.parametrize("requested_by", ["ayumi", "arn:aws:iam::123456789012:user/ayumi\nnext"])
def test_requested_by_must_be_an_iam_principal_arn(requested_by: str) -> None:
    with pytest.raises(RolloutInputError, match="invalid rollout request") as raised:
        request(requested_by=requested_by)
    assert f"{requested_by!r} is not an IAM principal ARN" in str(raised.value)


def test_validate_refuses_a_rollout_that_does_not_say_who_asked_unless_it_is_a_dry_run() -> None:
    unsigned = load_event("rollout_validate")["request"]
    del unsigned["requested_by"]
    assert "requested_by: required: the IAM principal ARN" in refused(parse_request(unsigned))
    dry = apply_guardrails(parse_request(unsigned | {"dry_run": True}), fleet(), CHECKS, STACK)
    assert dry.request.requested_by == "unknown"


def test_signed_principals_pass() -> None:
    for arn in ("arn:aws:sts::123456789012:assumed-role/Deployer/ci-run-7", "arn:aws:iam::123456789012:root"):
        assert request(requested_by=arn).requested_by == arn


def test_validate_plans_network_isolated_models_with_the_stack_role() -> None:
    primary = VariantSnapshot(
        variant_name="primary", model_name="v6-model", instance_type="ml.g5.2xlarge", instance_count=2, weight=1.0
    )
    snapshot = EndpointSnapshot(
        endpoint_name="manga-chat", status="InService", endpoint_config_name="v6-config", variants=(primary,)
    )
    deps = PrepareDeps(
        read_endpoint=lambda name: snapshot,
        read_pointer=lambda parameter: None,
        kill_switch_engaged=lambda: False,
        pointer_prefix="/stack/models",
        fleet=fleet(),
        checks=CHECKS,
        stack=STACK,
    )
    raw = load_event("rollout_validate")["request"]
    raw = raw | {"model": {k: v for k, v in raw["model"].items() if k != "execution_role_arn"}}
    plan = prepare_rollout(raw, datetime(2026, 11, 21, 9, tzinfo=UTC), deps)
    for created in (plan.create_model, plan.create_final_model):
        assert created["EnableNetworkIsolation"] is True and created["ExecutionRoleArn"] == ROLE
    assert plan.pre_traffic_gates is True  # the shipped prod floors run the artifact and candidate gates
    # The lease covers the longest run the floors allow, and no more than a few days.
    assert 2 * 86400 < plan.lease_expires_at - plan.now_epoch < 7 * 86400
    with pytest.raises(RolloutInputError, match="above the limit of 21600 s"):
        prepare_rollout(raw | {"bake_seconds": 30 * 86400}, datetime(2026, 11, 21, 9, tzinfo=UTC), deps)


def test_a_rollout_policy_whose_floor_is_above_its_limit_fails_the_fleet_file() -> None:
    with pytest.raises(ValueError, match="min_bake_seconds 7200 is above max_bake_seconds"):
        fleet({"prod": {"min_bake_seconds": 7200, "max_bake_seconds": 3600}})


def test_every_compare_kind_knows_which_way_loosens() -> None:
    assert set(LOOSER) == set(get_args(Compare))


def test_a_request_whose_longest_run_exceeds_the_lease_limit_is_refused() -> None:
    # Each bound holds (approval at every step for 3 days, 6 h bakes), but together they would hold the
    # endpoint's lease for about three weeks.
    every_step = request(approval_steps=[5, 25, 50, 75, 100], bake_seconds=21600, approval={"timeout_seconds": 259200})
    text = refused(every_step)
    assert "is above the limit of 604800 s it may hold the endpoint's lease" in text, text
