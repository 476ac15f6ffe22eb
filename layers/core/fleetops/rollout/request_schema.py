"""The rollout request: what an operator (or CI) starts, validated before anything is planned or touched.

Apart from the plan (:mod:`fleetops.rollout.plan`), so what only checks a request (the request function, the
CLI) builds neither the plan's models nor the fleet file's.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from fleetops.model_contract import (
    ENGINE_KNOB_PREFIX,
    OWNED,
    EngineKnobs,
    ModelContract,
    adapter_problems,
    environment_problems,
)
from fleetops.promotion.shadow_spec import ShadowSpec
from fleetops.rollout.in_service import InServiceSettings
from fleetops.rollout.thresholds import Thresholds
from fleetops.rollout.versions import (
    VERSION_PATTERN,
    AdapterVersion,
    Release,
    adapter_entry_problems,
    sha256_problem,
)
from fleetops.sagemaker_names import INSTANCE_TYPE_PATTERN, MAX_NAME, NAME_PATTERN
from fleetops.validation import StrictModel, problems

DEFAULT_STEPS = (5, 25, 50, 75, 100)
_SUFFIXES = ("-model", "-final-model", "-canary", "-shadow", "-final")
#: Who asked: an IAM principal's ARN (user, role, assumed role, federated user or root), as a signed caller has.
PRINCIPAL_ARN = r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:(root|[a-z-]+/[\w+=,.@/-]+)$"
#: What ``requested_by`` says on a dry run that did not name anyone; any other run must name its principal.
UNKNOWN_REQUESTER = "unknown"


class RolloutInputError(ValueError):
    """The rollout request is invalid; the message lists every problem. Nothing has been touched."""


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
    variant_name: str = Field(default="canary", min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN)


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

    rollout_id: str = Field(min_length=1, max_length=40, pattern=NAME_PATTERN)
    endpoint_name: str = Field(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN)
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
        if longest > MAX_NAME:
            problems.append(
                f"endpoint_name + rollout_id too long for SageMaker names ({longest} > {MAX_NAME} characters)"
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
    fleetops.rollout.request_schema.RolloutInputError: invalid rollout request: ...
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
