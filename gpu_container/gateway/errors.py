"""Every error a client can get from the gateway: code -> HTTP status, default message, the metric it counts.

The modules that find a problem raise :class:`GatewayError` with an :class:`ErrorCode` and know nothing of
HTTP; :func:`gateway.openai_wire.error_response` is the one place that turns it into the documented body
``{"error": {"code", "message", ...details}}`` with the code's status, and counts its metric. A new error
is one line in :class:`ErrorCode` and a ``raise`` where the problem is found.

Examples
--------
>>> error = GatewayError(ErrorCode.UNKNOWN_ADAPTER, "unknown adapter 'x'", valid_adapters=["base"])
>>> error.code.status, error.body()
(400, {'error': {'code': 'unknown_adapter', 'message': "unknown adapter 'x'", 'valid_adapters': ['base']}})
>>> GatewayError(ErrorCode.DRAINING).message
'this instance is shutting down'
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from fleetops.metrics import MetricName

if TYPE_CHECKING:
    from gateway.metrics import GatewayMetrics


class ErrorCode(StrEnum):
    """An error's ``code`` as clients see it, with its HTTP status, default message and metric (or ``None``)."""

    status: int
    default_message: str
    metric: MetricName | None

    def __new__(cls, code: str, status: int, default_message: str, metric: MetricName | None) -> ErrorCode:
        member = str.__new__(cls, code)
        member._value_ = code
        member.status = status
        member.default_message = default_message
        member.metric = metric
        return member

    # Bad input, answered before the engine is touched.
    INVALID_JSON = "invalid_json", 400, "request body is not valid JSON", MetricName.CLIENT_ERRORS
    INVALID_REQUEST = "invalid_request", 400, "invalid request", MetricName.CLIENT_ERRORS
    UNSUPPORTED_FIELD = "unsupported_field", 400, "a field the gateway does not accept", MetricName.CLIENT_ERRORS
    OVER_LIMIT = "over_limit", 400, "a field is beyond its limit", MetricName.CLIENT_ERRORS
    NO_QUESTION = (
        "no_question",
        400,
        "the last message must be the user's question (role 'user')",
        MetricName.CLIENT_ERRORS,
    )
    MAX_TOKENS_TOO_LARGE = "max_tokens_too_large", 400, "max_tokens is beyond the budget", MetricName.CLIENT_ERRORS
    CONTEXT_TOO_LARGE = "context_too_large", 400, "retrieved_context is beyond the budget", MetricName.CLIENT_ERRORS
    SYSTEM_TOO_LARGE = "system_too_large", 400, "the system messages are beyond the budget", MetricName.CLIENT_ERRORS
    PROMPT_TOO_LARGE = "prompt_too_large", 400, "the prompt does not fit max_model_len", MetricName.CLIENT_ERRORS
    UNKNOWN_ADAPTER = "unknown_adapter", 400, "unknown adapter", MetricName.CLIENT_ERRORS
    PAYLOAD_TOO_LARGE = "payload_too_large", 413, "request body over the size limit", MetricName.CLIENT_ERRORS
    NOT_FOUND = "not_found", 404, "no such route", MetricName.CLIENT_ERRORS
    # The instance cannot take the work; not counted: SageMaker retries elsewhere and /ping already says so.
    DRAINING = "draining", 503, "this instance is shutting down", None
    # Only ``GET /v1/models`` answers this (invocations fall back instead), and that traffic is uncounted.
    ENGINE_UNAVAILABLE = "engine_unavailable", 503, "the engine is not available; retry shortly", None
    DEADLINE_EXCEEDED = (
        "deadline_exceeded",
        504,
        "the request did not finish within its deadline and was cut off",
        MetricName.REQUEST_ERRORS,
    )


class FallbackReason(StrEnum):
    """Why ``/invocations`` answered with the fallback text (``backend.fallback_reason``, ``X-Gateway-Fallback``).

    Not errors: the client gets a 200 chat completion. Each is counted in ``Fallbacks`` and ``RequestErrors``.
    """

    ENGINE_OOM = "engine_oom"  # the engine ran out of memory (also counted in OomCaught)
    ENGINE_ERROR = "engine_error"  # any other 5xx from the engine
    ENGINE_UNAVAILABLE = "engine_unavailable"  # down, restarting, refused or lost the connection


class GatewayError(Exception):
    """A request the gateway answers with an error body; raised where the problem is found.

    Parameters
    ----------
    code
        The catalogue entry (status and metric come from it).
    message
        What the client reads; the code's default message when not given.
    details
        Further fields of the body (e.g. ``limit``, ``valid_adapters``).
    """

    def __init__(self, code: ErrorCode, message: str | None = None, **details: Any) -> None:
        self.code = code
        self.message = message or code.default_message
        self.details = details
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code.value, "message": self.message, **self.details}}


def count_error(code: ErrorCode, metrics: GatewayMetrics) -> None:
    """Count the code's metric; a stream that ends in an error event counts as its plain answer would."""
    if code.metric is not None:
        metrics.increment(code.metric)
