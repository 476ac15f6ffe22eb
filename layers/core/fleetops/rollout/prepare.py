"""Turn a rollout request into a plan: validate, check the kill switch, read the endpoint and pointer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetops.config import FleetConfig
from fleetops.endpoint import EndpointSnapshot
from fleetops.rollout.checks import CanaryChecks
from fleetops.rollout.guardrails import StackLimits, apply_guardrails
from fleetops.rollout.plan import RolloutPlan, StepCapacity, build_plan
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.request_schema import RolloutInputError, RolloutRequest, parse_request


class KillSwitchEngagedError(RuntimeError):
    """The kill switch is engaged: no rollout starts until an operator releases it."""


@dataclass(frozen=True)
class PrepareDeps:
    read_endpoint: Callable[[str], EndpointSnapshot]
    read_pointer: Callable[[str], Pointer | None]
    kill_switch_engaged: Callable[[], bool]
    pointer_prefix: str
    fleet: FleetConfig  # the endpoints of each environment and their rollout floors
    checks: CanaryChecks  # the declared limits a request may only tighten
    stack: StackLimits  # the one role, image repository and artifact bucket a model may use; the capture bucket
    dry_run: bool = False  # the stack's DRY_RUN: every rollout only plans
    max_num_seqs: int | None = None  # the stack's MaxNumSeqs: what the saturation alarm divides by


def with_stack_engine_knobs(request: RolloutRequest, max_num_seqs: int | None) -> RolloutRequest:
    """Give the model the stack's ``max_num_seqs``; refuse a request that asks for another.

    The saturation alarm is ``RunningRequests`` as a share of the stack's ``MaxNumSeqs``: an engine running
    any other value would make that alarm lie.

    Examples
    --------
    >>> role = "arn:aws:iam::123456789012:role/r"
    >>> model = {"name": "m", "version": "v7", "sha256": "a" * 64, "image_uri": "img", "execution_role_arn": role}
    >>> request = parse_request({"rollout_id": "r", "endpoint_name": "e", "model": model,
    ...                          "canary": {"instance_type": "ml.g5.2xlarge"}})
    >>> with_stack_engine_knobs(request, 64).model.engine.max_num_seqs
    64
    """
    if max_num_seqs is None:
        return request
    asked = request.model.engine.max_num_seqs
    if asked is not None and asked != max_num_seqs:
        raise RolloutInputError(
            f"invalid rollout request: model.engine.max_num_seqs: {asked} differs from the stack's MaxNumSeqs "
            f"{max_num_seqs}, which the saturation alarm assumes; change the stack parameter instead"
        )
    engine = request.model.engine.model_copy(update={"max_num_seqs": max_num_seqs})
    return request.model_copy(update={"model": request.model.model_copy(update={"engine": engine})})


def prepare_rollout(request: dict[str, Any], now: datetime, deps: PrepareDeps) -> RolloutPlan:
    """Validate the request and plan the rollout against the endpoint as it is now. Changes nothing.

    Raises
    ------
    RolloutInputError
        The request is invalid or asks for less than its environment's floors or the stack allows (every
        problem listed).
    KillSwitchEngagedError
        Automation is switched off.
    EndpointMissingError, EndpointNotReadyForRolloutError
        The endpoint does not exist, is not InService, or already has the canary variant.
    """
    guarded = apply_guardrails(parse_request(request), deps.fleet, deps.checks, deps.stack)
    parsed = with_stack_engine_knobs(guarded.request, deps.max_num_seqs)
    if deps.kill_switch_engaged():
        raise KillSwitchEngagedError("the automation kill switch is engaged; release it to start a rollout")
    endpoint = deps.read_endpoint(parsed.endpoint_name)
    listed = deps.fleet.endpoint(parsed.endpoint_name)  # the guardrails refused an unlisted one
    parameter = f"{deps.pointer_prefix.rstrip('/')}/{parsed.endpoint_name}"
    primary = listed.primary_variant() if listed else None
    capacity = (
        StepCapacity(max_canary=listed.canary_limits.max_instance_count, primary_floor=primary.floor if primary else 1)
        if listed
        else None
    )
    return build_plan(
        parsed,
        endpoint,
        now,
        parameter,
        deps.read_pointer(parameter),
        dry_run=deps.dry_run,
        network_isolation=guarded.floors.network_isolation,
        pre_traffic_gates=guarded.floors.pre_traffic_gates,
        capture=deps.stack.capture,
        hosting=listed.hosting if listed else None,
        capacity=capacity,
    )
