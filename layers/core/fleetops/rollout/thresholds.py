"""A rollout's overrides of the canary checks' limits: part of the rollout request, apart from the checks themselves.

The checks (:mod:`fleetops.rollout.checks`) are read from a file by the canary analysis and by Validate; the
request only needs this model, so the request function does not build the checks' models.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from fleetops.validation import StrictModel


class Thresholds(StrictModel):
    """A rollout's overrides of the declared limits; ``None`` keeps the check's own ``limit``.

    The field names are the rollout request's (``thresholds``); a check names the field that overrides it
    (``request_threshold``), and one field may override several checks (both latency regressions).
    Only the fields set are serialised, so a plan shows what the rollout changed.
    """

    min_requests: int | None = Field(default=None, ge=1, description="canary requests needed for a verdict")
    max_error_rate: float | None = Field(default=None, ge=0, le=1)
    max_error_rate_increase: float | None = Field(default=None, ge=0, le=1, description="over the baseline")
    max_latency_regression: float | None = Field(default=None, ge=0, description="p95 over baseline, fraction")
    max_ttft_p95_ms: int | None = Field(default=None, ge=0, description="the canary's p95 TTFT in ms, absolute")
    max_latency_p95_ms: int | None = Field(default=None, ge=0, description="the canary's p95 latency in ms, absolute")
    max_oom: int | None = Field(default=None, ge=0)
    max_breaker_trips: int | None = Field(default=None, ge=0)
    max_engine_restarts: int | None = Field(default=None, ge=0)

    @model_serializer(mode="wrap")
    def _set_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {name: value for name, value in dumped.items() if value is not None}
