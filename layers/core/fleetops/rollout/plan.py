"""The plan the canary rollout state machine follows, computed from a valid request.

Everything the workflow needs is computed here once, up front, from the request
(:mod:`fleetops.rollout.request_schema`) and a snapshot of the endpoint: resource names, the variants of the
canary and final endpoint configs, the weights of every step, the polling schedule and the lease. A request
the endpoint cannot take fails here, before anything changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from fleetops.config import VariantHosting
from fleetops.endpoint import EndpointSnapshot, VariantSnapshot
from fleetops.promotion.shadow_capture import CaptureDestination, data_capture_config
from fleetops.promotion.shadow_spec import ShadowSpec
from fleetops.rollout.config_copy import ConfigPlan, VariantPlan
from fleetops.rollout.in_service import InServiceSettings
from fleetops.rollout.lease_holders import ROLLOUT_LEASE_PREFIX
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.request_schema import (
    ApprovalSettings,
    CanarySpec,
    RolloutInputError,
    RolloutRequest,
    lease_budget_seconds,
)
from fleetops.rollout.thresholds import Thresholds
from fleetops.rollout.versions import ReleaseChange, registry_adapters, release_change
from fleetops.tables import REGISTRY_PK, REGISTRY_SHA256, REGISTRY_SK
from fleetops.validation import StrictModel


class EndpointNotReadyForRolloutError(RuntimeError):
    """The endpoint cannot start a rollout now (not InService, or a canary variant is already there)."""


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
