"""Fleet configuration: the versioned ``fleet.yaml`` that holds managed endpoints and the recurring calendar.

The fleet part is validated strictly (a wrong fleet file must fail the deploy, not a 2 a.m. run);
calendar entries are validated one by one so that one bad entry is reported and skipped while the
others still apply (see :func:`fleetops.calendar.parse_entries`).
"""

from __future__ import annotations

import re
from datetime import UTC, tzinfo
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import Field, field_validator, model_validator

from fleetops.inference_ami import INFERENCE_AMIS, NEWEST_INFERENCE_AMI
from fleetops.sagemaker_names import INSTANCE_TYPE_PATTERN
from fleetops.validation import StrictModel, check_zone, read_yaml_mapping


class FleetConfigError(ValueError):
    """The fleet file cannot be used at all (unreadable, not YAML, or an invalid fleet section)."""


class VariantConfig(StrictModel):
    """One production variant of a SageMaker endpoint and how to size it."""

    name: str = Field(min_length=1)
    role: Literal["primary", "canary"] = "primary"
    capacity_rps_per_instance: float = Field(gt=0, description="requests/s one instance serves at target latency")
    baseline_rps: float = Field(ge=0, description="normal traffic to this variant, requests/s")
    headroom: float = Field(default=1.2, ge=1.0, description="factor over the computed need")
    forecast_headroom: float | None = Field(
        default=None,
        ge=1.0,
        description="factor over the need a forecast from the variant's own history gives (None: headroom); the "
        "configured levels of a variant without enough history keep headroom",
    )
    floor: int = Field(ge=1, description="never fewer instances than this")
    cap: int = Field(ge=1, description="never more instances than this")
    instance_type: str = Field(default="ml.g5.2xlarge", min_length=1)
    price_per_instance_hour: float | None = Field(
        default=None, ge=0, description="on-demand USD per instance-hour; the capacity simulator's cost figures"
    )
    traffic_timezone: str = Field(
        default="UTC",
        description="where most of the variant's users are (IANA name): the forecast reads past weeks at the same "
        "local time, so a daylight-saving change does not shift it by an hour",
    )

    _traffic_zone = field_validator("traffic_timezone")(check_zone)

    @property
    def traffic_zone(self) -> tzinfo:
        return UTC if self.traffic_timezone == "UTC" else ZoneInfo(self.traffic_timezone)

    @property
    def headroom_over_forecast(self) -> float:
        return self.headroom if self.forecast_headroom is None else self.forecast_headroom

    @model_validator(mode="after")
    def _floor_below_cap(self) -> VariantConfig:
        if self.floor > self.cap:
            raise ValueError(f"variant {self.name!r}: floor {self.floor} is above cap {self.cap}")
        return self


class VariantHosting(StrictModel):
    """What every production variant of every endpoint config the project creates for the endpoint carries.

    Without ``InferenceAmiVersion`` SageMaker runs NVIDIA driver 470 (CUDA 11.4), older than the container's CUDA;
    the container checks the driver at start and names the AMI to choose (``gateway.cuda_check``).
    """

    inference_ami_version: str = Field(
        default=NEWEST_INFERENCE_AMI, description="ProductionVariant.InferenceAmiVersion: the driver and CUDA version"
    )
    container_startup_health_check_timeout_s: int = Field(
        default=1200, ge=60, le=3600, description="how long the container may take to answer /ping (load + warm-up)"
    )
    model_data_download_timeout_s: int = Field(
        default=1200, ge=60, le=3600, description="how long SageMaker may take to download and unpack ModelDataUrl"
    )

    @field_validator("inference_ami_version")
    @classmethod
    def _documented(cls, value: str) -> str:
        names = [ami.name for ami in INFERENCE_AMIS]
        if value not in names:
            raise ValueError(f"inference_ami_version {value!r} is not a GPU AMI SageMaker documents: {names}")
        return value

    def variant_fields(self) -> dict[str, Any]:
        """The ``ProductionVariant`` fields of CreateEndpointConfig.

        Examples
        --------
        >>> fields = VariantHosting(inference_ami_version="al2-ami-sagemaker-inference-gpu-3-1").variant_fields()
        >>> for name, value in fields.items():
        ...     print(name, value)
        InferenceAmiVersion al2-ami-sagemaker-inference-gpu-3-1
        ContainerStartupHealthCheckTimeoutInSeconds 1200
        ModelDataDownloadTimeoutInSeconds 1200
        """
        return {
            "InferenceAmiVersion": self.inference_ami_version,
            "ContainerStartupHealthCheckTimeoutInSeconds": self.container_startup_health_check_timeout_s,
            "ModelDataDownloadTimeoutInSeconds": self.model_data_download_timeout_s,
        }


class CanaryLimits(StrictModel):
    """What a rollout's canary may cost on one endpoint: the instance types it may run on and how many instances.

    The promoted variant runs on the canary's instance type, so the allow-list bounds the whole fleet's type too.
    """

    instance_types: tuple[str, ...] = Field(
        default=(),
        description="the instance types a canary may ask for; empty: the types of the endpoint's variants",
    )
    max_instance_count: int = Field(default=1, ge=1, le=20, description="the most instances a canary may ask for")

    @field_validator("instance_types")
    @classmethod
    def _instance_types(cls, types: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in types if not re.fullmatch(INSTANCE_TYPE_PATTERN, t)]
        if bad:
            raise ValueError(f"instance_types {bad} are not SageMaker instance types (ml.<family>.<size>)")
        return types


class InitialModel(StrictModel):
    """What ``fleetctl endpoint create`` deploys on an endpoint that does not exist yet (its flags win).

    Rollouts replace the model afterwards; the role must be the stack's ``ModelExecutionRoleArn``.
    """

    image_uri: str | None = Field(default=None, min_length=1, max_length=255)
    model_data_url: str | None = Field(default=None, pattern=r"^s3://[^/]+/.+")
    # A rollout's version rule (fleetops.rollout.versions.VERSION_PATTERN); shared core may not import a capability.
    version: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    execution_role_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+")


class EndpointConfig(StrictModel):
    name: str = Field(min_length=1)
    environment: Literal["dev", "prod"] = "prod"
    variants: tuple[VariantConfig, ...] = Field(min_length=1)
    hosting: VariantHosting = VariantHosting()
    initial_model: InitialModel = InitialModel()
    canary_limits: CanaryLimits = CanaryLimits()

    def primary_variant(self) -> VariantConfig | None:
        """The first variant whose role is ``primary`` (``None``: none is)."""
        return next((v for v in self.variants if v.role == "primary"), None)

    def canary_instance_types(self) -> tuple[str, ...]:
        """The instance types a rollout's canary may run on: ``canary_limits``', else those of the variants."""
        listed = self.canary_limits.instance_types
        return listed or tuple(sorted({v.instance_type for v in self.variants}))

    @model_validator(mode="after")
    def _production_floor(self) -> EndpointConfig:
        if self.environment == "prod":
            low = [v.name for v in self.variants if v.role == "primary" and v.floor < 2]
            if low:
                raise ValueError(f"endpoint {self.name!r}: production primary variants need floor >= 2: {low}")
        return self


class PrescaleSettings(StrictModel):
    lead_time_minutes: int = Field(default=120, ge=0, description="scale up this long before an event starts")
    scale_in_delay_minutes: int = Field(default=15, ge=10, description="keep capacity this long after an event ends")
    planning_horizon_hours: int = Field(default=168, ge=1, le=24 * 14)
    history_days: int = Field(
        default=28,
        ge=0,
        le=63,
        description="days of the variant's own Invocations the forecast reads (CloudWatch keeps 5-minute data for "
        "63 days); 0 plans from the configured levels only",
    )
    min_history_days: float = Field(
        default=7, ge=7, description="less history than this (a new endpoint) plans from the configured levels"
    )
    min_event_occurrences: int = Field(
        default=2, ge=1, description="past occurrences an entry needs before its learned size replaces its multiplier"
    )
    max_scheduled_actions: int = Field(
        default=150,
        ge=2,
        le=200,
        description="scheduled actions kept per variant; Application Auto Scaling allows 200 per scalable target",
    )


class RolloutFloors(StrictModel):
    """What every rollout on an endpoint of one environment must at least do; a request may only be stricter.

    The defaults are the strict ones, so an environment ``rollout_policy`` does not list fails closed.
    """

    approval_steps: tuple[int, ...] = Field(
        default=(100,), description="step weights a person must approve (100: the promotion)"
    )
    min_bake_seconds: int = Field(default=600, ge=0, description="no step bakes shorter")
    max_bake_seconds: int = Field(default=6 * 3600, ge=1, description="no step bakes longer (bounds the lease)")
    max_approval_timeout_seconds: int = Field(default=3 * 24 * 3600, ge=1)
    max_approval_heartbeat_seconds: int = Field(default=24 * 3600, ge=1)
    max_extensions: int = Field(default=3, ge=0, le=10, description="extra bakes on an inconclusive verdict")
    max_lease_seconds: int = Field(
        default=7 * 24 * 3600, ge=3600, description="the longest run a request may plan: how long it holds the lease"
    )
    network_isolation: bool = Field(
        default=True,
        description="CreateModel's EnableNetworkIsolation: the container reaches no network (nor Bedrock: the "
        "Bedrock fallback is then the caller's, clients.fallback_client)",
    )
    pre_traffic_gates: bool = Field(
        default=True,
        description="check the artifact before anything is created, then load-test and evaluate the canary at "
        "weight 0 before any user is routed to it (fleetops.promotion); a failure rolls back before users",
    )
    max_shadow_sampling_percent: int = Field(
        default=20,
        ge=1,
        le=100,
        description="the largest share of live requests a shadowed rollout may capture (users' conversations)",
    )
    watch_after_promotion_seconds: int = Field(
        default=24 * 3600,
        ge=0,
        le=7 * 24 * 3600,
        description="after a promotion, the primary's error, latency, OOM and engine-death alarms roll back to the "
        "previous release for this long (the playbook's on_alarm.promoted); later they only notify. 0: never",
    )

    @model_validator(mode="after")
    def _ordered(self) -> RolloutFloors:
        problems = []
        if self.min_bake_seconds > self.max_bake_seconds:
            problems.append(f"min_bake_seconds {self.min_bake_seconds} is above max_bake_seconds")
        if self.max_approval_heartbeat_seconds > self.max_approval_timeout_seconds:
            problems.append("max_approval_heartbeat_seconds is above max_approval_timeout_seconds")
        bad = [w for w in self.approval_steps if not 0 < w <= 100]
        if bad:
            problems.append(f"approval_steps must be step weights in 1..100, got {bad}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class FleetConfig(StrictModel):
    """The fleet section of ``fleet.yaml`` plus the raw, not-yet-validated calendar entries."""

    version: str = Field(min_length=1)
    prescale: PrescaleSettings = PrescaleSettings()
    endpoints: tuple[EndpointConfig, ...] = Field(min_length=1)
    recurring: tuple[dict[str, Any], ...] = ()
    off_peak: tuple[dict[str, Any], ...] = ()
    rollout_policy: dict[Literal["dev", "prod"], RolloutFloors] = Field(
        default_factory=dict, description="per environment; an environment not listed gets the strict defaults"
    )

    def rollout_floors(self, environment: Literal["dev", "prod"]) -> RolloutFloors:
        """The floors for rollouts on an endpoint of ``environment``."""
        return self.rollout_policy.get(environment) or RolloutFloors()

    def endpoint(self, name: str) -> EndpointConfig | None:
        return next((e for e in self.endpoints if e.name == name), None)

    def endpoint_names(self) -> frozenset[str]:
        return frozenset(e.name for e in self.endpoints)

    def managed_by(self, environment: str | None) -> tuple[EndpointConfig, ...]:
        """The endpoints a stack of ``environment`` manages (all of them when ``None``).

        One fleet file serves every stack; a dev stack never touches a prod endpoint.
        """
        return tuple(e for e in self.endpoints if environment is None or e.environment == environment)


def load_fleet_config(path: str | Path) -> FleetConfig:
    """Read and validate ``fleet.yaml``.

    Examples
    --------
    >>> import fleetops
    >>> shipped = Path(fleetops.__file__).parents[1] / "fleet_config"  # beside the package, as in the layer
    >>> shipped_fleet = load_fleet_config(shipped / "fleet.yaml")
    >>> [e.name for e in shipped_fleet.managed_by("prod")], shipped_fleet.rollout_floors("prod").approval_steps
    (['manga-chat-prod'], (100,))
    >>> load_fleet_config(shipped / "missing.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fleetops.config.FleetConfigError: cannot read fleet config .../fleet_config/missing.yaml: [Errno 2] ...
    """
    raw = read_yaml_mapping(path, "fleet config", FleetConfigError)
    calendar = raw.pop("calendar", None) or {}
    try:
        return FleetConfig.model_validate(
            {**raw, "recurring": calendar.get("recurring") or (), "off_peak": calendar.get("off_peak") or ()}
        )
    except ValueError as exc:
        raise FleetConfigError(f"invalid fleet config {path}: {exc}") from exc
