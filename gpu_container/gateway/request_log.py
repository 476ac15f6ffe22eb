"""One structured log line per answered request, its ``X-Request-Id``, and its per-adapter metrics.

The gateway writes one JSON line per ``/invocations`` (and ``POST /v1/chat/completions``) answer on stdout, where
SageMaker ships it to CloudWatch Logs beside the EMF lines (CloudWatch extracts no metric from it: it has no
``_aws`` member). It says who asked (``request_id``, ``session_id``), what served (``adapter``,
``model_version``, ``prompt_version``), how it went (``status``, ``outcome``, ``error_code``,
``fallback_reason``, and ``engine_death_cause`` when a fallback came of an engine that died or is dying:
``cuda_oom``, ``xid``, ``nccl``, ``killed``, ``other``, see :mod:`gateway.engine_death`) and how long each part
took; never the prompt, the history or the answer text.

Timings, in milliseconds from the gateway receiving the request:

- ``queue_wait_ms``: a plain answer's time in the engine's waiting queue (vLLM's per-request ``queue_time_ms``);
  a stream's time until the engine answered the request (its first event);
- ``ttft_ms``: until the first answer token existed. A stream measures it when the first content chunk passes;
  a plain answer is ``latency_ms`` less the engine's decode time (vLLM's ``generation_time_ms``), i.e. what a
  stream would have shown;
- ``generation_ms``: first to last token (the decode); ``latency_ms``: the whole answer, a stream's last byte.

A field the request never reached (no adapter before routing, no timings on an error) is ``null``.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from fleetops.metrics import MetricName
from gateway.relay import RelayResponse

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.datastructures import Headers
    from starlette.responses import Response

    from gateway.metrics import GatewayMetrics

#: The header a caller may set to name its request; the answer always carries it back.
REQUEST_ID_HEADER = "X-Request-Id"
#: SageMaker's own id of an InvokeEndpoint call, used when the caller set no ``X-Request-Id``.
SAGEMAKER_INFERENCE_ID_HEADER = "X-Amzn-SageMaker-Inference-Id"
#: What a caller's id may look like: it lands in log lines and headers, so a bounded, plain charset.
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
#: A session id is the client's: logged only when it is as plain as a request id, else left out.
SESSION_ID_PATTERN = REQUEST_ID_PATTERN


def request_id(headers: Mapping[str, str]) -> str:
    """The caller's ``X-Request-Id`` when it is 1-128 safe characters, else SageMaker's inference id, else a new one.

    An id that is too long, empty or holds anything beyond letters, digits and ``._:-`` is replaced, not
    trimmed: a log search for a half id finds nothing useful, a fresh id at least ties the line to the answer.

    Examples
    --------
    >>> request_id({"x-request-id": "chat-42.a:b"})
    'chat-42.a:b'
    >>> len(request_id({"x-request-id": "bad id\\n"}))  # replaced by a generated one
    32
    >>> request_id({"x-amzn-sagemaker-inference-id": "inf-7"})
    'inf-7'
    """
    for header in (REQUEST_ID_HEADER, SAGEMAKER_INFERENCE_ID_HEADER):
        given = headers.get(header.lower())
        if given is not None and REQUEST_ID_PATTERN.fullmatch(given):
            return given
    return uuid.uuid4().hex


def safe_session_id(value: str | None) -> str | None:
    """The client's ``session_id`` if it is a plain id, else ``None`` (free text may hold personal data).

    Examples
    --------
    >>> safe_session_id("s-123"), safe_session_id("my name is Aiko"), safe_session_id(None)
    ('s-123', None, None)
    """
    return value if value is not None and SESSION_ID_PATTERN.fullmatch(value) else None


@dataclass(frozen=True)
class EngineTimings:
    """vLLM's own timings of one request (``--enable-per-request-metrics``: the answer's ``metrics``)."""

    queue_ms: float | None
    prefill_ms: float | None
    generation_ms: float | None


@dataclass(slots=True)
class RequestTrace:
    """What one request did, filled in as it goes through the gateway; ends as one log line."""

    request_id: str
    started: float  # time.perf_counter() at arrival
    stream: bool = False
    session_id: str | None = None
    adapter: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    dropped_turns: int | None = None
    queue_wait_ms: float | None = None
    ttft_ms: float | None = None
    generation_ms: float | None = None
    latency_ms: float | None = None
    #: Set where a 200 answer is not the engine's (a stream cut at the deadline or ended by a fallback).
    outcome: str | None = None
    fallback_reason: str | None = None
    #: A fallback's engine failure, where the engine's death or log says why (gateway.engine_death.DeathCause).
    engine_death_cause: str | None = None

    def elapsed_ms(self, now: float | None = None) -> float:
        return ((time.perf_counter() if now is None else now) - self.started) * 1000

    def first_token(self) -> float:
        """A stream's first content chunk: its TTFT, in ms."""
        self.ttft_ms = self.elapsed_ms()
        return self.ttft_ms

    def answered(self, tokens_out: int, engine: EngineTimings | None = None) -> None:
        """The answer is complete: total latency, and the split into queue, TTFT and decode where known."""
        self.latency_ms = self.elapsed_ms()
        self.tokens_out = tokens_out
        if engine is not None:  # a plain answer: the engine says how long the decode took
            self.queue_wait_ms = engine.queue_ms
            self.generation_ms = engine.generation_ms
            if engine.generation_ms is not None:
                self.ttft_ms = max(self.latency_ms - engine.generation_ms, 0.0)
        elif self.ttft_ms is not None:  # a stream: TTFT was seen on the wire
            self.generation_ms = max(self.latency_ms - self.ttft_ms, 0.0)

    def ended_by(self, outcome: str, fallback_reason: str | None = None) -> None:
        self.outcome, self.fallback_reason = outcome, fallback_reason


def outcome_of(trace: RequestTrace, response: Response) -> tuple[str, str | None, str | None]:
    """(outcome, error code, fallback reason) of an answer: ``ok``, ``client_error``, ``fallback``, ``deadline``,
    ``unavailable`` or ``error``.

    Examples
    --------
    >>> from starlette.responses import JSONResponse
    >>> trace = RequestTrace("r", 0.0)
    >>> outcome_of(trace, JSONResponse({"error": {"code": "over_limit"}}, 400))
    ('client_error', 'over_limit', None)
    >>> outcome_of(trace, JSONResponse({}, 200, {"X-Gateway-Fallback": "engine_oom"}))
    ('fallback', None, 'engine_oom')
    """
    status = response.status_code
    if status == 200:
        if trace.outcome is not None:
            return trace.outcome, None, trace.fallback_reason
        reason = response.headers.get("x-gateway-fallback")
        return ("fallback", None, reason) if reason else ("ok", None, None)
    code = _error_code(response)
    if status == 504:
        return "deadline", code, None
    if status == 503:
        return "unavailable", code, None
    return ("client_error" if status < 500 else "error"), code, None


def _error_code(response: Response) -> str | None:
    """The ``error.code`` of an error body (the gateway's names it, vLLM's carries its status)."""
    body = getattr(response, "body", b"")
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return None if code is None else str(code)


class RequestLog:
    """Writes each request's line, returns its id on the answer, and counts it under its adapter.

    Parameters
    ----------
    model_version, prompt_version
        The model's ``MODEL_VERSION`` and ``gateway.yaml``'s ``system_prompt.version``, on every line.
    metrics
        The recorder; each finished request with an adapter is recorded under it (``Adapter`` dimension).
    out
        Where the lines go; ``None`` means ``sys.stdout`` at construction time.
    """

    def __init__(
        self, model_version: str, prompt_version: str, metrics: GatewayMetrics, out: TextIO | None = None
    ) -> None:
        self.model_version = model_version
        self.prompt_version = prompt_version
        self.metrics = metrics
        self._out = out if out is not None else sys.stdout

    def begin(self, headers: Headers, started: float) -> RequestTrace:
        return RequestTrace(request_id(headers), started)

    def finish(self, trace: RequestTrace, response: Response) -> Response:
        """Put ``X-Request-Id`` on the answer and log it now, or for a stream when its last byte is sent."""
        response.headers[REQUEST_ID_HEADER] = trace.request_id
        if isinstance(response, RelayResponse):
            held = response.on_close

            def closed() -> None:
                if held is not None:
                    held()
                self.write(trace, response)

            response.on_close = closed
        else:
            self.write(trace, response)
        return response

    def write(self, trace: RequestTrace, response: Response) -> None:
        if trace.latency_ms is None:
            trace.latency_ms = trace.elapsed_ms()
        record = self.record(trace, response)
        self._out.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._out.flush()
        if trace.adapter is not None:
            self._count(trace, record["outcome"])

    def record(self, trace: RequestTrace, response: Response) -> dict[str, Any]:
        """The log line's fields (see the module docstring); no prompt, history or answer text."""
        outcome, code, reason = outcome_of(trace, response)
        return {
            "log_type": "request",
            "request_id": trace.request_id,
            "session_id": trace.session_id,
            "adapter": trace.adapter,
            "model_version": self.model_version,
            "prompt_version": self.prompt_version,
            "stream": trace.stream,
            "status": response.status_code,
            "outcome": outcome,
            "error_code": code,
            "fallback_reason": reason,
            "engine_death_cause": trace.engine_death_cause,
            "tokens_in": trace.tokens_in,
            "tokens_out": trace.tokens_out,
            "dropped_turns": trace.dropped_turns,
            "queue_wait_ms": _ms(trace.queue_wait_ms),
            "ttft_ms": _ms(trace.ttft_ms),
            "generation_ms": _ms(trace.generation_ms),
            "latency_ms": _ms(trace.latency_ms),
        }

    def _count(self, trace: RequestTrace, outcome: str) -> None:
        counted = [MetricName.REQUESTS, *_OUTCOME_COUNTERS.get(outcome, ())]
        observed: dict[MetricName, float] = {}
        if trace.tokens_in is not None:
            observed[MetricName.TOKENS_IN] = trace.tokens_in
        if outcome == "ok":  # timings of answers the engine gave, as the endpoint/variant totals count them
            for name, value in (
                (MetricName.REQUEST_LATENCY, trace.latency_ms),
                (MetricName.TIME_TO_FIRST_TOKEN, trace.ttft_ms),
                (MetricName.QUEUE_WAIT, trace.queue_wait_ms),
                (MetricName.GENERATION_TIME, trace.generation_ms),
                (MetricName.TOKENS_OUT, trace.tokens_out),
            ):
                if value is not None:
                    observed[name] = value
        self.metrics.record_adapter(trace.adapter or "", counted, observed)


_OUTCOME_COUNTERS: dict[str, tuple[MetricName, ...]] = {
    "client_error": (MetricName.CLIENT_ERRORS,),
    "fallback": (MetricName.FALLBACKS, MetricName.REQUEST_ERRORS),
    "deadline": (MetricName.REQUEST_ERRORS,),
    "error": (MetricName.REQUEST_ERRORS,),
}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
