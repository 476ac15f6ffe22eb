"""The rollout request (what an operator starts) and the plan the state machine follows.

Everything the workflow needs is computed here once, up front, from the request and a snapshot of
the endpoint: resource names, the variants of the canary and final endpoint configs, the weights of
every step, the polling schedule and the lease. A bad request fails here, before anything changes.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from fleetops.config import INSTANCE_TYPE_PATTERN, VariantHosting
from fleetops.endpoint import EndpointSnapshot, VariantSnapshot
from fleetops.model_contract import (
    ENGINE_KNOB_PREFIX,
    OWNED,
    EngineKnobs,
    ModelContract,
    adapter_problems,
    environment_problems,
)
from fleetops.promotion.shadow_capture import CaptureDestination, data_capture_config
from fleetops.promotion.shadow_spec import ShadowSpec
from fleetops.rollout.checks import Thresholds
from fleetops.rollout.config_copy import ConfigPlan, VariantPlan
from fleetops.rollout.in_service import InServiceSettings
from fleetops.rollout.lease_holders import ROLLOUT_LEASE_PREFIX
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.versions import (
    VERSION_PATTERN,
    AdapterVersion,
    Release,
    ReleaseChange,
    adapter_entry_problems,
    registry_adapters,
    release_change,
    sha256_problem,
)
from fleetops.tables import REGISTRY_PK, REGISTRY_SHA256, REGISTRY_SK
from fleetops.validation import StrictModel, problems

DEFAULT_STEPS = (5, 25, 50, 75, 100)
# SageMaker resource names: alphanumerics and hyphens, at most 63 characters.
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
_MAX_NAME = 63
_SUFFIXES = ("-model", "-final-model", "-canary", "-shadow", "-final")
#: Who asked: an IAM principal's ARN (user, role, assumed role, federated user or root), as a signed caller has.
PRINCIPAL_ARN = r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:(root|[a-z-]+/[\w+=,.@/-]+)$"
#: What ``requested_by`` says on a dry run that did not name anyone; any other run must name its principal.
UNKNOWN_REQUESTER = "unknown"


class RolloutInputError(ValueError):
    """The rollout request is invalid; the message lists every problem. Nothing has been touched."""


class EndpointNotReadyForRolloutError(RuntimeError):
    """The endpoint cannot start a rollout now (not InService, or a canary variant is already there)."""


class ModelSpec(StrictModel):
    """The new model version: image, weights, adapters and engine knobs (see :mod:`fleetops.model_contract`).

    The base model (``name``, ``version``, ``sha256``) and each adapter (:class:`AdapterVersion`) are versioned
    apart, so a rollout may change one adapter and leave the base as it is (see :mod:`fleetops.rollout.versions`).
    """

    name: str = Field(min_length=1, max_length=64, description="model family in the registry, e.g. manga-llama")
    version: str = Field(min_length=1, max_length=64, pattern=VERSION_PATTERN)
    sha256: str = Field(description="the artifact gate's digest of the base model (its files' sha256sum listing)")
    image_uri: str = Field(min_length=1, max_length=255)
    model_data_url: str | None = Field(default=None, pattern=r"^s3://[^/]+/.+")
    environment: dict[str, str] = Field(default_factory=dict, description="more variables; not the contract's own")
    adapters: dict[str, AdapterVersion] | None = Field(
        default=None,
        description="LoRA adapter name -> its version, folder inside the model artifact (LORA_MODULES) and sha256; "
        "None: the image's default set",
    )
    engine: EngineKnobs = Field(default_factory=EngineKnobs, description="vLLM engine knobs (SM_VLLM_*)")
    execution_role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+",
        description="None: the stack's model execution role; any other role is refused at Validate",
    )

    @field_validator("environment")
    @classmethod
    def _environment_limits(cls, env: dict[str, str]) -> dict[str, str]:
        # SageMaker: at most 100 entries, keys and values up to 1024 characters.
        problems = []
        if len(env) > 100 - len(OWNED) - len(EngineKnobs.model_fields):
            problems.append(f"too many environment variables ({len(env)}): SageMaker allows 100 with the contract's")
        too_long = [k for k, v in env.items() if len(k) > 1024 or len(v) > 1024]
        if too_long:
            problems.append(f"environment entries longer than 1024 characters: {too_long}")
        owned = sorted(k for k in env if k in OWNED or k.startswith(ENGINE_KNOB_PREFIX))
        if owned:
            problems.append(
                f"environment sets {owned}, which the rollout writes itself: use model.version, model.adapters "
                "and model.engine"
            )
        else:
            problems += environment_problems(env)
        if problems:
            raise ValueError("; ".join(problems))
        return env

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, value: str) -> str:
        problem = sha256_problem(value)
        if problem:
            raise ValueError(f"base model {problem}")
        return value

    @field_validator("adapters", mode="before")
    @classmethod
    def _adapter_entries(cls, adapters: Any) -> Any:
        # Before parsing: the message names the adapter, not a field path, and says what an old-style entry lacks.
        problems = adapter_entry_problems(adapters)
        if problems:
            raise ValueError("; ".join(problems))
        return adapters

    @field_validator("adapters")
    @classmethod
    def _adapter_paths(cls, adapters: dict[str, AdapterVersion] | None) -> dict[str, AdapterVersion] | None:
        problems = adapter_problems(cls._paths(adapters) or {})
        if problems:
            raise ValueError("; ".join(problems))
        return adapters

    @staticmethod
    def _paths(adapters: dict[str, AdapterVersion] | None) -> dict[str, str] | None:
        return None if adapters is None else {name: entry.path for name, entry in adapters.items()}

    def release(self) -> Release:
        """The base model and adapter versions this model serves."""
        return Release(model=self.name, version=self.version, sha256=self.sha256, adapters=self.adapters)

    def container(self, endpoint_name: str, variant_name: str) -> dict[str, Any]:
        """``PrimaryContainer`` for CreateModel: the image, the weights, and the contract for one variant."""
        contract = ModelContract(
            endpoint_name=endpoint_name,
            variant_name=variant_name,
            model_version=self.version,
            adapters=self._paths(self.adapters),
            engine=self.engine,
        )
        container: dict[str, Any] = {"Image": self.image_uri, "Environment": self.environment | contract.environment()}
        if self.model_data_url:
            container["ModelDataUrl"] = self.model_data_url
        return container


class CanarySpec(StrictModel):
    """The canary variant; fleet.yaml's ``canary_limits`` bound its type and count (the guardrails)."""

    instance_type: str = Field(pattern=INSTANCE_TYPE_PATTERN)
    instance_count: int = Field(default=1, ge=1, le=20)
    variant_name: str = Field(default="canary", min_length=1, max_length=63, pattern=_NAME.pattern)


class StepSpec(StrictModel):
    weight: int = Field(gt=0, le=100, description="percent of traffic on the canary")
    bake_seconds: int | None = Field(default=None, ge=0)
    approval: bool | None = None


class ApprovalSettings(StrictModel):
    timeout_seconds: int = Field(default=24 * 3600, ge=1, description="hard limit for a decision")
    heartbeat_seconds: int = Field(
        default=4 * 3600, ge=1, description="a decision or a heartbeat (`more time`) is due within this"
    )

    @model_validator(mode="after")
    def _heartbeat_inside_timeout(self) -> ApprovalSettings:
        if self.heartbeat_seconds > self.timeout_seconds:
            raise ValueError("approval.heartbeat_seconds must not exceed approval.timeout_seconds")
        return self


class RolloutRequest(StrictModel):
    """What an operator (or CI) passes to the canary rollout state machine."""

    rollout_id: str = Field(min_length=1, max_length=40, pattern=_NAME.pattern)
    endpoint_name: str = Field(min_length=1, max_length=63, pattern=_NAME.pattern)
    model: ModelSpec
    canary: CanarySpec
    steps: tuple[int | StepSpec, ...] = DEFAULT_STEPS
    bake_seconds: int = Field(default=900, ge=0)
    approval_steps: tuple[int, ...] = (100,)
    approval: ApprovalSettings = ApprovalSettings()
    thresholds: Thresholds = Thresholds()  # overrides of the limits in fleet_config/canary_checks.yaml
    in_service: InServiceSettings = InServiceSettings()
    max_extensions: int = Field(default=2, ge=0, le=10, description="extra bakes allowed on an inconclusive verdict")
    shadow: ShadowSpec | None = Field(
        default=None,
        description="capture a sampled share of live requests at weight 0, replay them to the candidate and compare "
        "before the first step (fleetops.promotion.shadow); None: no shadow phase",
    )
    requested_by: str = Field(
        default=UNKNOWN_REQUESTER, max_length=256, description="the IAM principal ARN of who asked (the signed caller)"
    )
    dry_run: bool = Field(default=False, description="plan, audit as planned, change nothing")

    @model_validator(mode="after")
    def _consistent(self) -> RolloutRequest:
        weights = [s if isinstance(s, int) else s.weight for s in self.steps]
        problems = []
        if not weights:
            problems.append("steps must not be empty")
        elif weights != sorted(set(weights)):
            problems.append(f"steps must strictly increase, got {weights}")
        elif weights[-1] != 100:
            problems.append(f"the last step must be 100 (promotion), got {weights[-1]}")
        if any(w <= 0 or w > 100 for w in weights):
            problems.append(f"step weights must be in 1..100, got {weights}")
        # Required only where the stack checks it (guardrails): a CLI validates a request before it is signed.
        if self.requested_by != UNKNOWN_REQUESTER and not re.fullmatch(PRINCIPAL_ARN, self.requested_by):
            problems.append(f"requested_by: {self.requested_by!r} is not an IAM principal ARN (arn:aws:iam::...)")
        unknown = sorted(set(self.approval_steps) - set(weights))
        if unknown:
            problems.append(f"approval_steps {unknown} are not steps {weights}")
        longest = len(self.endpoint_name) + 1 + len(self.rollout_id) + max(map(len, _SUFFIXES))
        if longest > _MAX_NAME:
            problems.append(
                f"endpoint_name + rollout_id too long for SageMaker names ({longest} > {_MAX_NAME} characters)"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def step_specs(self) -> list[StepSpec]:
        specs = []
        for step in self.steps:
            spec = StepSpec(weight=step) if isinstance(step, int) else step
            specs.append(
                StepSpec(
                    weight=spec.weight,
                    bake_seconds=self.bake_seconds if spec.bake_seconds is None else spec.bake_seconds,
                    approval=(spec.weight in self.approval_steps) if spec.approval is None else spec.approval,
                )
            )
        return specs


class StepCapacity(StrictModel):
    """What the capacity task sizes each step within (fleet.yaml): see :mod:`fleetops.rollout.step_sizing`."""

    max_canary: int = Field(ge=1, description="canary_limits.max_instance_count: a step needing more is refused")
    primary_floor: int = Field(ge=1, description="the primary variant's floor")


class PlanStep(StrictModel):
    index: int
    weight: int
    weights: tuple[dict[str, Any], ...] = Field(description="DesiredWeightsAndCapacities for this step")
    bake_seconds: int
    approval: bool = Field(description="asked before this step's weights change (the 100 % step: before promotion)")
    promote: bool = Field(
        default=False, description="the 100 % step: the primary's instances take the new model, the canary goes"
    )


class RolloutPlan(StrictModel):
    """Everything the state machine needs, computed once; field names are read by the ASL."""

    rollout_id: str
    endpoint_name: str
    requested_by: str
    lease_holder: str
    now_epoch: int
    lease_expires_at: int
    model_name: str
    final_model_name: str
    create_model: dict[str, Any]
    create_final_model: dict[str, Any]
    previous_endpoint_config_name: str
    canary_endpoint_config_name: str
    final_endpoint_config_name: str
    canary_config: ConfigPlan = Field(description="the current config copied, with the canary added at weight 0")
    final_config: ConfigPlan = Field(description="the promoted config: the baseline variant with the new model")
    canary_variant_name: str
    baseline_variant_name: str
    steps: tuple[PlanStep, ...]
    step_count: int
    capacity: StepCapacity
    rollback_weights: tuple[dict[str, Any], ...]
    in_service: InServiceSettings
    rollback_in_service: InServiceSettings
    in_service_waits: tuple[int, ...]
    in_service_polls: int
    approval: ApprovalSettings
    thresholds: Thresholds  # the request's overrides only; the analysis applies them to the declared checks
    max_extensions: int
    pointer_parameter: str
    new_pointer: Pointer
    new_pointer_json: str
    previous_pointer_json: str
    registry_item: dict[str, Any]
    change: ReleaseChange = Field(description="how the release differs from the pointer's: base, adapters only, ...")
    pre_traffic_gates: bool = Field(
        default=True, description="the artifact gate before the lease, the candidate gate before the first step"
    )
    shadow: ShadowSpec | None = None
    shadow_endpoint_config_name: str | None = Field(
        default=None, description="the canary config's variants with data capture on, for shadow.seconds only"
    )
    shadow_config: ConfigPlan | None = None
    canary_data_capture: dict[str, Any] | None = Field(
        default=None, description="the shadow config's DataCaptureConfig (capture bucket and key)"
    )
    dry_run: bool = False
    kind: Literal["rollout-plan"] = "rollout-plan"


def parse_request(event: dict[str, Any]) -> RolloutRequest:
    """Validate a rollout request, listing every problem in one clear error.

    Raises
    ------
    RolloutInputError
        With one line per problem (``field: message``).

    Examples
    --------
    >>> parse_request({"rollout_id": "bad id!"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fleetops.rollout.plan.RolloutInputError: invalid rollout request: ...
    """
    try:
        return RolloutRequest.model_validate(event)
    except ValidationError as exc:
        raise RolloutInputError("invalid rollout request: " + "; ".join(problems(exc))) from None


def lease_budget_seconds(request: RolloutRequest) -> int:
    """How long the rollout's lease lasts: the longest possible run (every wait, bake and approval) plus an hour.

    Examples
    --------
    >>> lease_budget_seconds(parse_request({"rollout_id": "r", "endpoint_name": "e", "dry_run": True,
    ...     "model": {"name": "m", "version": "v", "sha256": "a" * 64, "image_uri": "i"},
    ...     "canary": {"instance_type": "ml.g5.xlarge"},
    ...     "steps": [100], "bake_seconds": 600, "max_extensions": 0,
    ...     "approval": {"timeout_seconds": 3600, "heartbeat_seconds": 3600}}))
    26250
    """
    specs = request.step_specs()
    approvals = sum(bool(s.approval) for s in specs) * request.approval.timeout_seconds
    bakes = sum(s.bake_seconds or 0 for s in specs) * (1 + request.max_extensions)
    # The shadow phase: capture on, its seconds, capture off (two endpoint updates).
    shadow = request.shadow.seconds + 2 * sum(request.in_service.waits()) if request.shadow else 0
    # Two waits a step (its instances, then its weights) and three more (canary, promotion, rollback).
    return approvals + bakes + shadow + (2 * len(specs) + 3) * sum(request.in_service.waits()) + 3600


def _split_weight(total: float, variants: tuple[VariantSnapshot, ...]) -> list[dict[str, Any]]:
    """Share ``total`` percent over the current variants in proportion to their current weights."""
    current = sum(v.weight for v in variants) or float(len(variants))
    return [
        {"VariantName": v.variant_name, "DesiredWeight": round(total * ((v.weight or 1.0) / current), 4)}
        for v in variants
    ]


def _check_instance_type(canary: CanarySpec, baseline: VariantSnapshot) -> None:
    """Refuse a canary whose instance type is not the baseline's: the promoted variant keeps the baseline's type.

    SageMaker refuses an UpdateEndpoint that changes the instance type of a variant registered with Application
    Auto Scaling; moving the fleet to another type is its own change (deregister the scalable target, update,
    register it again), not a rollout's.
    """
    if canary.instance_type != baseline.instance_type:
        raise RolloutInputError(
            f"invalid rollout request: canary.instance_type: {canary.instance_type!r} is not the instance type of "
            f"the primary variant {baseline.variant_name!r} ({baseline.instance_type or 'none: serverless'}); the "
            "promoted variant keeps the primary's instance type, since SageMaker refuses to change the instance "
            "type of an autoscaled variant in an endpoint update. Run the canary on "
            f"{baseline.instance_type or 'an instance type'} (a new instance type is a change of its own: "
            "deregister the scalable target, update the endpoint, register it again). Nothing was changed."
        )


def build_plan(
    request: RolloutRequest,
    endpoint: EndpointSnapshot,
    now: datetime,
    pointer_parameter: str,
    current_pointer: Pointer | None,
    dry_run: bool = False,
    network_isolation: bool = True,
    pre_traffic_gates: bool = True,
    capture: CaptureDestination | None = None,
    hosting: VariantHosting | None = None,
    capacity: StepCapacity | None = None,
) -> RolloutPlan:
    """Compute the rollout plan from the request and the endpoint as it is now.

    ``network_isolation`` is CreateModel's ``EnableNetworkIsolation`` and ``pre_traffic_gates`` whether the
    workflow runs the artifact and candidate gates (both from the environment's ``rollout_policy``);
    ``capture`` is the stack's capture bucket and key, where a shadowed rollout's data capture writes;
    ``hosting`` (fleet.yaml's, for the endpoint) goes onto every variant of both configs, the ones copied from
    the current config included, so no config the rollout creates falls back to SageMaker's old default driver.
    ``capacity`` bounds the canary's size at each step (fleet.yaml's ``canary_limits``; by default the request's
    canary count). The configs themselves are built when the workflow reaches them
    (:mod:`fleetops.rollout.config_copy`).

    Raises
    ------
    RolloutInputError
        When the model has no execution role (the stack's is filled in by
        :func:`fleetops.rollout.guardrails.apply_guardrails`), or the canary's instance type is not the primary's.
    EndpointNotReadyForRolloutError
        When the endpoint is not InService or already carries the canary variant.
    """
    role = request.model.execution_role_arn
    if role is None:
        raise RolloutInputError("invalid rollout request: model.execution_role_arn: not set and no stack role given")
    if endpoint.status != "InService":
        raise EndpointNotReadyForRolloutError(
            f"endpoint {endpoint.endpoint_name!r} is {endpoint.status}; start the rollout once it is InService"
        )
    names = [v.variant_name for v in endpoint.variants]
    if request.canary.variant_name in names:
        raise EndpointNotReadyForRolloutError(
            f"endpoint {endpoint.endpoint_name!r} already has a variant {request.canary.variant_name!r} "
            "(a rollout in progress or an unfinished one: roll back first)"
        )
    base = f"{request.endpoint_name}-{request.rollout_id}"
    # A model tells its container which variant it serves (metric dimensions), so the variant it is promoted
    # to gets a model of its own: same image, weights and knobs, the baseline's variant name.
    model_name = f"{base}-model"
    final_model_name = f"{base}-final-model"
    canary = request.canary
    baseline = max(endpoint.variants, key=lambda v: (v.weight, v.instance_count))
    _check_instance_type(canary, baseline)
    hosted = (hosting or VariantHosting()).variant_fields()
    # Built when the workflow reaches them, from the config serving now (every field and tag copied) and the live
    # instance counts: see fleetops.rollout.config_copy.
    canary_config = ConfigPlan(
        endpoint_name=request.endpoint_name,
        endpoint_config_name=f"{base}-canary",
        source_config_name=endpoint.endpoint_config_name,
        copy_variants=True,
        add=(
            VariantPlan(
                variant_name=canary.variant_name,
                copy_of=baseline.variant_name,
                model_name=model_name,
                instance_count=canary.instance_count,
                weight=0.0,
                own_capacity=True,
            ),
        ),
        hosting=hosted,
    )
    # Promotion keeps the baseline variant's name, instance type and fields, so scaling targets and alarms
    # (keyed by variant name) keep working; its instance count is read at promotion, never below the count
    # at the plan: at the 100 % step the baseline sits at weight 0 and autoscaling may have scaled it in.
    final_config = ConfigPlan(
        endpoint_name=request.endpoint_name,
        endpoint_config_name=f"{base}-final",
        source_config_name=endpoint.endpoint_config_name,
        copy_variants=False,
        add=(
            VariantPlan(
                variant_name=baseline.variant_name,
                copy_of=baseline.variant_name,
                model_name=final_model_name,
                min_instance_count=max(baseline.instance_count, 1),
                weight=1.0,
            ),
        ),
        hosting=hosted,
    )
    steps = tuple(
        PlanStep(
            index=i,
            weight=spec.weight,
            weights=(
                *_split_weight(100.0 - spec.weight, endpoint.variants),
                {"VariantName": canary.variant_name, "DesiredWeight": float(spec.weight)},
            ),
            bake_seconds=spec.bake_seconds or 0,
            approval=bool(spec.approval),
            promote=spec.weight == 100,
        )
        for i, spec in enumerate(request.step_specs())
    )
    waits = request.in_service.waits()
    budget = lease_budget_seconds(request)
    if request.shadow and capture is None:
        raise RolloutInputError(
            "invalid rollout request: shadow: the stack names no capture bucket and key for the data capture"
        )
    shadow_config = (
        canary_config.model_copy(
            update={
                "endpoint_config_name": f"{base}-shadow",
                "data_capture": data_capture_config(request.shadow, capture, request.rollout_id),
            }
        )
        if request.shadow and capture
        else None
    )
    now_epoch = int(now.timestamp())
    release = request.model.release()
    pointer = Pointer(
        **release.model_dump(),
        sagemaker_model=final_model_name,
        endpoint_config_name=f"{base}-final",
        rollout_id=request.rollout_id,
        previous_endpoint_config_name=endpoint.endpoint_config_name,
        previous_version=current_pointer.version if current_pointer else None,
        previous_sha256=current_pointer.sha256 if current_pointer else None,
        previous_adapters=current_pointer.adapters if current_pointer else None,
    )
    previous_pointer = current_pointer or Pointer(
        model=request.model.name,
        version="unknown",
        sagemaker_model=baseline.model_name,
        endpoint_config_name=endpoint.endpoint_config_name,
    )
    return RolloutPlan(
        rollout_id=request.rollout_id,
        endpoint_name=request.endpoint_name,
        requested_by=request.requested_by,
        lease_holder=f"{ROLLOUT_LEASE_PREFIX}{request.rollout_id}",
        now_epoch=now_epoch,
        lease_expires_at=now_epoch + budget,
        model_name=model_name,
        final_model_name=final_model_name,
        create_model={
            "ModelName": model_name,
            "ExecutionRoleArn": role,
            "PrimaryContainer": request.model.container(request.endpoint_name, canary.variant_name),
            "EnableNetworkIsolation": network_isolation,
        },
        create_final_model={
            "ModelName": final_model_name,
            "ExecutionRoleArn": role,
            "PrimaryContainer": request.model.container(request.endpoint_name, baseline.variant_name),
            "EnableNetworkIsolation": network_isolation,
        },
        previous_endpoint_config_name=endpoint.endpoint_config_name,
        canary_endpoint_config_name=f"{base}-canary",
        final_endpoint_config_name=f"{base}-final",
        canary_config=canary_config,
        final_config=final_config,
        canary_variant_name=canary.variant_name,
        baseline_variant_name=baseline.variant_name,
        steps=steps,
        step_count=len(steps),
        capacity=capacity
        or StepCapacity(max_canary=canary.instance_count, primary_floor=max(baseline.instance_count, 1)),
        rollback_weights=(
            *_split_weight(100.0, endpoint.variants),
            {"VariantName": canary.variant_name, "DesiredWeight": 0.0},
        ),
        in_service=request.in_service,
        # A rollback may first have to sit out the update that made the rollout give up: give it longer.
        rollback_in_service=request.in_service.model_copy(
            update={"timeout_seconds": 3 * request.in_service.timeout_seconds}
        ),
        in_service_waits=tuple(waits),
        in_service_polls=len(waits),
        approval=request.approval,
        thresholds=request.thresholds,
        max_extensions=request.max_extensions,
        pointer_parameter=pointer_parameter,
        new_pointer=pointer,
        new_pointer_json=pointer.to_json(),
        previous_pointer_json=previous_pointer.to_json(),
        dry_run=dry_run or request.dry_run,
        pre_traffic_gates=pre_traffic_gates,
        shadow=request.shadow,
        shadow_endpoint_config_name=shadow_config.endpoint_config_name if shadow_config else None,
        shadow_config=shadow_config,
        canary_data_capture=shadow_config.data_capture if shadow_config else None,
        change=release_change(current_pointer.release() if current_pointer else None, release),
        registry_item={
            REGISTRY_PK: {"S": request.model.name},
            # One row per release (base + adapter set): an adapter-only change adds a row, never rewrites one.
            REGISTRY_SK: {"S": release.release_key()},
            "base_version": {"S": release.version},
            REGISTRY_SHA256: {"S": request.model.sha256},
            "adapters": registry_adapters(release.adapters),
            "kind": {"S": "sagemaker"},
            "sagemaker_model": {"S": final_model_name},
            "image_uri": {"S": request.model.image_uri},
            "endpoint_name": {"S": request.endpoint_name},
            "endpoint_config_name": {"S": f"{base}-final"},
            "previous_endpoint_config_name": {"S": endpoint.endpoint_config_name},
            "rollout_id": {"S": request.rollout_id},
            "requested_by": {"S": request.requested_by},
        },
    )
