"""The rollout's capacity task: size the canary for a step, grow the primary to promote, wait until they serve.

The state machine calls it with one of three requests (:data:`CapacityRequest`) and loops on ``ensure`` until the
answer is ``ready``; the numbers come from :mod:`fleetops.rollout.step_capacity`. Weights never change here: the
workflow moves users only once the instances a step needs serve.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, TypeAdapter

from fleetops.rollout.step_capacity import desired_count, primary_need, serving, size_step
from fleetops.validation import StrictModel


class SizeCanary(StrictModel):
    action: Literal["size_canary"]
    endpoint_name: str = Field(min_length=1)
    canary_variant_name: str = Field(min_length=1)
    baseline_variant_name: str = Field(min_length=1)
    weight: float = Field(gt=0, lt=100)
    floor: int = Field(ge=1, description="the primary's floor (fleet.yaml)")
    max_canary: int = Field(ge=1, description="fleet.yaml canary_limits.max_instance_count")


class GrowPrimary(StrictModel):
    action: Literal["grow_primary"]
    endpoint_name: str = Field(min_length=1)
    baseline_variant_name: str = Field(min_length=1)
    canary_variant_name: str = Field(min_length=1)


class Ensure(StrictModel):
    action: Literal["ensure"]
    endpoint_name: str = Field(min_length=1)
    variant: str = Field(min_length=1)
    count: int = Field(ge=1)


class Release(StrictModel):
    action: Literal["release"]
    endpoint_name: str = Field(min_length=1)
    canary_variant_name: str = Field(min_length=1)


CapacityRequest = Annotated[SizeCanary | GrowPrimary | Ensure | Release, Field(discriminator="action")]
_REQUEST: TypeAdapter[SizeCanary | GrowPrimary | Ensure | Release] = TypeAdapter(CapacityRequest)


def parse_capacity_request(event: Mapping[str, Any]) -> SizeCanary | GrowPrimary | Ensure | Release:
    return _REQUEST.validate_python(dict(event))


class CapacityResult(StrictModel):
    """What the state machine reads: the variant it waits for, how many instances, and whether they serve."""

    variant: str
    count: int
    ready: bool
    serving_before: int | None = Field(default=None, description="instances serving users when the step was sized")
    note: str = ""


class Targets(Protocol):
    def hold(self, endpoint_name: str, canary: str, baseline: str, min_capacity: int, max_capacity: int) -> bool: ...

    def max_capacity(self, endpoint_name: str, variant_name: str) -> int | None: ...

    def release(self, endpoint_name: str, canary: str) -> bool: ...


@dataclass(frozen=True)
class CapacityDeps:
    describe: Callable[[str], Mapping[str, Any]]  # DescribeEndpoint
    set_count: Callable[[str, str, int], None]  # UpdateEndpointWeightsAndCapacities: one variant's count, no weight
    targets: Targets


def ensure(endpoint_name: str, variant: str, count: int, deps: CapacityDeps) -> CapacityResult:
    """Ready once ``variant`` serves ``count`` instances; else ask for them (unless an update already goes there)."""
    live = deps.describe(endpoint_name)
    if serving(live, variant, count):
        return CapacityResult(variant=variant, count=count, ready=True, note=f"{variant} serves {count}")
    status = str(live.get("EndpointStatus"))
    if status == "InService" and desired_count(live, variant) < count:
        deps.set_count(endpoint_name, variant, count)
        return CapacityResult(variant=variant, count=count, ready=False, note=f"{variant} asked for {count}")
    return CapacityResult(variant=variant, count=count, ready=False, note=f"endpoint {status}, {variant} not there")


def size_canary(request: SizeCanary, deps: CapacityDeps) -> CapacityResult:
    """Refuse a step the canary limit cannot size; else hold the canary's target at the size and ask for it."""
    live = deps.describe(request.endpoint_name)
    before, size = size_step(
        live,
        endpoint_name=request.endpoint_name,
        weight=request.weight,
        floor=request.floor,
        max_canary=request.max_canary,
    )
    # MinCapacity first: the canary's own tracking never scales it in below the step's size meanwhile.
    canary, baseline = request.canary_variant_name, request.baseline_variant_name
    deps.targets.hold(request.endpoint_name, canary, baseline, size.canary, request.max_canary)
    result = ensure(request.endpoint_name, request.canary_variant_name, size.canary, deps)
    return result.model_copy(update={"serving_before": before})


def grow_primary(request: GrowPrimary, deps: CapacityDeps) -> CapacityResult:
    """Before the primary's instances take the new model and every user: as many as serve users now."""
    live = deps.describe(request.endpoint_name)
    cap = deps.targets.max_capacity(request.endpoint_name, request.baseline_variant_name)
    need = max(1, primary_need(live, max_primary=cap))
    result = ensure(request.endpoint_name, request.baseline_variant_name, need, deps)
    return result.model_copy(update={"serving_before": need})


def handle(request: SizeCanary | GrowPrimary | Ensure | Release, deps: CapacityDeps) -> CapacityResult:
    if isinstance(request, SizeCanary):
        return size_canary(request, deps)
    if isinstance(request, GrowPrimary):
        return grow_primary(request, deps)
    if isinstance(request, Ensure):
        return ensure(request.endpoint_name, request.variant, request.count, deps)
    released = deps.targets.release(request.endpoint_name, request.canary_variant_name)
    return CapacityResult(
        variant=request.canary_variant_name,
        count=0,
        ready=True,
        note="scalable target deregistered" if released else "no scalable target",
    )
