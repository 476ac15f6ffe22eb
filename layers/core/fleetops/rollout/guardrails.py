"""What a rollout request may not decide: the floors of its environment and the stack's closed deploy payload.

:func:`fleetops.rollout.request_schema.parse_request` checks that a request is well formed; this module checks it
against what the stack was deployed with, so that whoever may start a rollout still cannot:

- skip an approval, shorten a bake or loosen a canary check below the floors of the endpoint's environment
  (``rollout_policy`` in ``fleet.yaml``, the limits of ``canary_checks.yaml``), or hold the lease for weeks;
- roll out to an endpoint ``fleet.yaml`` does not list for the stack's environment, or without saying who asked;
- pass another execution role, an image from another repository, weights from another bucket, or an
  environment variable that opens engine routes or loads code;
- deploy a prod image by tag, or a canary of an instance type or count the endpoint's ``canary_limits`` do not
  allow (:mod:`fleetops.rollout.endpoint_limits`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from fleetops.config import EndpointConfig, FleetConfig, RolloutFloors
from fleetops.promotion.shadow_capture import CaptureDestination
from fleetops.rollout.checks import CanaryChecks, Compare
from fleetops.rollout.endpoint_limits import canary_problems, image_problems
from fleetops.rollout.request_schema import (
    UNKNOWN_REQUESTER,
    ModelSpec,
    RolloutInputError,
    RolloutRequest,
    lease_budget_seconds,
)
from fleetops.rollout.thresholds import Thresholds

#: Where a request's value is looser than the declared limit, per kind of check (see canary_checks.yaml).
LOOSER: dict[Compare, str] = {
    "minimum_sample": "smaller",
    "maximum": "larger",
    "baseline_increase": "larger",
    "baseline_regression": "larger",
}
#: The model's Bedrock fallback calls Bedrock over the network, which network isolation blocks.
_NEEDS_NETWORK = ("BEDROCK_FALLBACK_MODEL_ID",)


@dataclass(frozen=True)
class StackLimits:
    """What the stack lets a model be: its one execution role, image repository and artifact bucket."""

    execution_role_arn: str
    image_repository: str  # e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm
    artifact_bucket: str
    environment_name: Literal["dev", "prod"] | None = None  # None: every endpoint of fleet.yaml
    capture: CaptureDestination | None = None  # where a shadowed rollout captures; None: shadow refused


@dataclass(frozen=True)
class Guarded:
    """A request that passed the guardrails, with the stack's role filled in, and its environment's floors."""

    request: RolloutRequest
    floors: RolloutFloors


def apply_guardrails(request: RolloutRequest, fleet: FleetConfig, checks: CanaryChecks, stack: StackLimits) -> Guarded:
    """Check the request against the stack; give the model the stack's execution role.

    Raises
    ------
    RolloutInputError
        Listing every problem, each naming the field, the limit and the requested value.
    """
    endpoint, problems = _endpoint(request.endpoint_name, fleet, stack.environment_name)
    # An unlisted endpoint has no environment: its floors are not judged (the endpoint problem says enough),
    # and the strictest ones decide the model's isolation.
    floors = fleet.rollout_floors(endpoint.environment) if endpoint else RolloutFloors()
    if request.requested_by == UNKNOWN_REQUESTER and not request.dry_run:
        problems.append("requested_by: required: the IAM principal ARN of who asked (a dry run may omit it)")
    if endpoint is not None:
        problems += _approval_problems(request, floors, endpoint)
        problems += _duration_problems(request, floors)
        problems += image_problems(request.model.image_uri, stack.image_repository, endpoint)
        problems += canary_problems(request.canary, endpoint)
        problems += _shadow_problems(request, floors, endpoint)
    problems += threshold_problems(request.thresholds, checks)
    problems += _payload_problems(request.model, stack, floors)
    if problems:
        raise RolloutInputError("rollout request refused: " + "; ".join(problems))
    model = request.model.model_copy(update={"execution_role_arn": stack.execution_role_arn})
    return Guarded(request.model_copy(update={"model": model}), floors)


def _endpoint(
    name: str, fleet: FleetConfig, environment: Literal["dev", "prod"] | None
) -> tuple[EndpointConfig | None, list[str]]:
    endpoint = next((e for e in fleet.managed_by(environment) if e.name == name), None)
    if endpoint is not None:
        return endpoint, []
    listed = sorted(e.name for e in fleet.managed_by(environment))
    scope = f"the {environment} environment in fleet.yaml" if environment else "fleet.yaml"
    return None, [f"endpoint_name: {name!r} is not an endpoint of {scope} (listed: {listed})"]


def _approval_problems(request: RolloutRequest, floors: RolloutFloors, endpoint: EndpointConfig) -> list[str]:
    approved = {spec.weight for spec in request.step_specs() if spec.approval}
    missing = sorted(set(floors.approval_steps) - approved)
    if not missing:
        return []
    return [
        f"approval_steps: steps {missing} must ask a person on a {endpoint.environment} endpoint "
        f"(fleet.yaml rollout_policy.{endpoint.environment}.approval_steps {list(floors.approval_steps)}); "
        f"the request asks at {sorted(approved)}"
    ]


def _duration_problems(request: RolloutRequest, floors: RolloutFloors) -> list[str]:
    problems = []
    for spec in request.step_specs():
        bake = spec.bake_seconds or 0
        if bake < floors.min_bake_seconds:
            problems.append(
                f"bake_seconds: step {spec.weight} bakes {bake} s, below the floor of {floors.min_bake_seconds} s"
            )
        elif bake > floors.max_bake_seconds:
            problems.append(
                f"bake_seconds: step {spec.weight} bakes {bake} s, above the limit of {floors.max_bake_seconds} s"
            )
    limits = (
        ("approval.timeout_seconds", request.approval.timeout_seconds, floors.max_approval_timeout_seconds),
        ("approval.heartbeat_seconds", request.approval.heartbeat_seconds, floors.max_approval_heartbeat_seconds),
        ("max_extensions", request.max_extensions, floors.max_extensions),
    )
    problems += [f"{field}: {asked} is above the limit of {limit}" for field, asked, limit in limits if asked > limit]
    budget = lease_budget_seconds(request)
    if budget > floors.max_lease_seconds:
        problems.append(
            f"the longest run this request allows (every bake, extension, approval and wait: {budget} s) is above "
            f"the limit of {floors.max_lease_seconds} s it may hold the endpoint's lease: fewer approval steps, "
            "shorter approval timeouts or bakes"
        )
    return problems


def _shadow_problems(request: RolloutRequest, floors: RolloutFloors, endpoint: EndpointConfig) -> list[str]:
    # Capture stores users' conversations: an environment caps the share of them a rollout may take.
    if request.shadow is None or request.shadow.sampling_percent <= floors.max_shadow_sampling_percent:
        return []
    return [
        f"shadow.sampling_percent: {request.shadow.sampling_percent} % of live requests is above the limit of "
        f"{floors.max_shadow_sampling_percent} % on a {endpoint.environment} endpoint (fleet.yaml rollout_policy."
        f"{endpoint.environment}.max_shadow_sampling_percent): captured requests are users' conversations"
    ]


def threshold_problems(thresholds: Thresholds, checks: CanaryChecks) -> list[str]:
    """Each override looser than the declared limit of a check it overrides.

    Examples
    --------
    >>> from fleetops.rollout.checks import load_canary_checks
    >>> threshold_problems(Thresholds(min_requests=500, max_error_rate=0.001), load_canary_checks())
    []
    >>> threshold_problems(Thresholds(min_requests=20), load_canary_checks())  # doctest: +ELLIPSIS
    ["thresholds.min_requests: 20 is looser than check 'requests' (minimum_sample, declared limit 200...)..."]
    """
    asked = thresholds.model_dump()
    problems = []
    for name, check in checks.checks.items():
        value = asked.get(check.request_threshold) if check.request_threshold else None
        if value is None:
            continue
        looser = value < check.limit if LOOSER[check.compare] == "smaller" else value > check.limit
        if looser:
            problems.append(
                f"thresholds.{check.request_threshold}: {value} is looser than check {name!r} ({check.compare}, "
                f"declared limit {check.limit:g}); a request may only tighten it (a {LOOSER[check.compare]} "
                "value loosens)"
            )
    return problems


def _payload_problems(model: ModelSpec, stack: StackLimits, floors: RolloutFloors) -> list[str]:
    problems = []
    if model.execution_role_arn is not None and model.execution_role_arn != stack.execution_role_arn:
        problems.append(
            f"model.execution_role_arn: {model.execution_role_arn!r} is not the stack's model execution role "
            f"{stack.execution_role_arn!r} (leave the field out to use it)"
        )
    image = re.compile(re.escape(stack.image_repository) + r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})")
    if not image.fullmatch(model.image_uri):
        problems.append(
            f"model.image_uri: {model.image_uri!r} is not an image of the stack's repository: use "
            f"{stack.image_repository}:<tag> or {stack.image_repository}@sha256:<64 hex digits>"
        )
    if model.model_data_url is not None and not model.model_data_url.startswith(f"s3://{stack.artifact_bucket}/"):
        problems.append(
            f"model.model_data_url: {model.model_data_url!r} is outside the stack's model artifact bucket "
            f"s3://{stack.artifact_bucket}/"
        )
    if floors.pre_traffic_gates and model.model_data_url is None:
        problems.append(
            "model.model_data_url: required here (fleet.yaml rollout_policy pre_traffic_gates): the artifact gate "
            "checks the weights, adapters and checksums before anything is deployed, and weights baked into an "
            "image cannot be checked"
        )
    if floors.network_isolation:
        problems += [
            f"model.environment {name}: the model runs network-isolated here (fleet.yaml rollout_policy "
            "network_isolation), so its Bedrock fallback could never reach Bedrock"
            for name in _NEEDS_NETWORK
            if name in model.environment
        ]
    return problems
