"""Gateway configuration: a versioned YAML file for behaviour, environment variables for the deployment.

The YAML (``gpu_container/config/gateway.yaml``, baked into the image) holds budgets, routing, the
fallback message, restart and drain policy. The environment says where things are (model, adapters,
config file), which endpoint/variant this is, and optionally an external engine to attach to.
Both are parsed once at start-up; a wrong value fails there with a clear message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config" / "gateway.yaml"
BASE_MODEL = "base"


class GatewayConfigError(ValueError):
    """The configuration file or the environment cannot be used."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SystemPrompt(_Strict):
    version: str = Field(min_length=1)
    text: str = Field(min_length=1)


class BudgetConfig(_Strict):
    max_model_len: int = Field(gt=0)
    default_max_tokens: int = Field(gt=0)
    max_tokens_limit: int = Field(gt=0)
    history_high_tokens: int = Field(gt=0)
    history_low_tokens: int = Field(ge=0)
    compressed_history_tokens: int = Field(ge=0)
    max_context_tokens: int = Field(gt=0)
    truncation_marker: str = "[{dropped} earlier turns omitted]"

    @model_validator(mode="after")
    def _consistent(self) -> BudgetConfig:
        if self.history_low_tokens >= self.history_high_tokens:
            raise ValueError("budget.history_low_tokens must be below budget.history_high_tokens")
        if self.default_max_tokens > self.max_tokens_limit:
            raise ValueError("budget.default_max_tokens must not exceed budget.max_tokens_limit")
        if self.max_tokens_limit >= self.max_model_len:
            raise ValueError("budget.max_tokens_limit must be below budget.max_model_len")
        if "{dropped}" not in self.truncation_marker:
            raise ValueError("budget.truncation_marker must contain '{dropped}'")
        return self


class Route(_Strict):
    intent: str | None = None
    locale: str | None = None
    adapter: str = Field(min_length=1)

    @model_validator(mode="after")
    def _has_condition(self) -> Route:
        if self.intent is None and self.locale is None:
            raise ValueError(f"route to {self.adapter!r} needs an intent or a locale")
        return self


class RoutingConfig(_Strict):
    adapters: list[str] = Field(default_factory=list)
    default: str = BASE_MODEL
    routes: list[Route] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_targets(self) -> RoutingConfig:
        known = {*self.adapters, BASE_MODEL}
        unknown = sorted({r.adapter for r in self.routes} - known | ({self.default} - known))
        if unknown:
            raise ValueError(f"routing names adapters {unknown} that are not in routing.adapters {self.adapters}")
        return self


class BreakerConfig(_Strict):
    fallback_message: str = Field(min_length=1)
    request_deadline_s: float = Field(gt=0, le=60)
    retry_with_compressed_context: bool = True


class SupervisorConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8081, gt=0, lt=65536)
    health_interval_s: float = Field(default=1.0, gt=0)
    health_failures_to_restart: int = Field(default=3, ge=1)
    startup_timeout_s: float = Field(default=600, gt=0)
    restart_backoff_initial_s: float = Field(default=1.0, ge=0)
    restart_backoff_max_s: float = Field(default=30.0, ge=0)
    max_failed_restarts: int = Field(default=3, ge=0)
    extra_args: list[str] = Field(default_factory=list)


class DrainConfig(_Strict):
    window_s: float = Field(default=20, gt=0, le=22)  # + uvicorn close (3 s) + engine stop (7 s) < SIGKILL at ~30 s


class ServerConfig(_Strict):
    port: int = Field(default=8080, gt=0, lt=65536)
    max_body_bytes: int = Field(default=6 * 1024 * 1024, gt=0)


class GatewayConfig(_Strict):
    """Everything in ``gateway.yaml``."""

    system_prompt: SystemPrompt
    budget: BudgetConfig
    routing: RoutingConfig
    breaker: BreakerConfig
    supervisor: SupervisorConfig = SupervisorConfig()
    drain: DrainConfig = DrainConfig()
    server: ServerConfig = ServerConfig()


class Environment(_Strict):
    """What the deployment says through environment variables (read once at start-up)."""

    config_path: Path = DEFAULT_CONFIG
    model_dir: Path = Path("/opt/ml/model")
    adapters_dir: Path | None = None
    engine_url: str | None = None
    endpoint_name: str = "local"
    variant_name: str = "local"
    backend_version: str = "dev"
    port: int | None = None
    bind_host: str = "0.0.0.0"
    engine_port: int | None = None
    bedrock_model_id: str | None = None
    metrics_interval_s: float = Field(default=60.0, gt=0)

    @property
    def resolved_adapters_dir(self) -> Path:
        return self.adapters_dir or self.model_dir / "adapters"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Environment:
        """Read the environment.

        ``GATEWAY_CONFIG``, ``MODEL_DIR`` (SageMaker: ``/opt/ml/model``), ``ADAPTERS_DIR`` (default
        ``$MODEL_DIR/adapters``), ``ENGINE_URL`` (attach to a running vLLM instead of starting one),
        ``SAGEMAKER_ENDPOINT_NAME``/``ENDPOINT_NAME``, ``SAGEMAKER_VARIANT_NAME``/``VARIANT_NAME``,
        ``BACKEND_VERSION``, ``SAGEMAKER_BIND_TO_PORT``/``PORT``, ``BIND_HOST``, ``ENGINE_PORT``,
        ``BEDROCK_FALLBACK_MODEL_ID``, ``METRICS_INTERVAL_S``.

        Examples
        --------
        >>> Environment.from_env({"MODEL_DIR": "/m", "VARIANT_NAME": "canary"}).resolved_adapters_dir
        PosixPath('/m/adapters')
        """
        env = os.environ if env is None else env
        raw: dict[str, Any] = {
            "config_path": env.get("GATEWAY_CONFIG"),
            "model_dir": env.get("MODEL_DIR"),
            "adapters_dir": env.get("ADAPTERS_DIR"),
            "engine_url": env.get("ENGINE_URL"),
            "endpoint_name": env.get("SAGEMAKER_ENDPOINT_NAME") or env.get("ENDPOINT_NAME"),
            "variant_name": env.get("SAGEMAKER_VARIANT_NAME") or env.get("VARIANT_NAME"),
            "backend_version": env.get("BACKEND_VERSION"),
            "port": env.get("SAGEMAKER_BIND_TO_PORT") or env.get("PORT"),
            "bind_host": env.get("BIND_HOST"),
            "engine_port": env.get("ENGINE_PORT"),
            "bedrock_model_id": env.get("BEDROCK_FALLBACK_MODEL_ID"),
            "metrics_interval_s": env.get("METRICS_INTERVAL_S"),
        }
        try:
            return cls.model_validate({k: v for k, v in raw.items() if v})
        except ValidationError as exc:
            raise GatewayConfigError(f"invalid gateway environment: {exc}") from exc


def load_gateway_config(path: str | Path) -> GatewayConfig:
    """Load and validate ``gateway.yaml``.

    Raises
    ------
    GatewayConfigError
        If the file is missing, is not YAML, or a value is invalid; the message names the field.

    Examples
    --------
    >>> load_gateway_config(DEFAULT_CONFIG).budget.max_model_len
    2048
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GatewayConfigError(f"cannot read gateway config {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise GatewayConfigError(f"gateway config {path} is not valid YAML: {exc}") from exc
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        raise GatewayConfigError(f"invalid gateway config {path}: {exc}") from exc
