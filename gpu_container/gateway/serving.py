"""``/invocations``: budget, routing, the engine call, and the controlled answers when the engine fails or is slow.

Documented answers (see README "GPU data plane container"):

- 4xx JSON ``{"error": {"code", "message", ...}}`` for bad input, answered before the engine is touched
  (codes in :mod:`gateway.errors`);
- engine failure (out of memory, 5xx, connection refused, engine restarting): one retry with a
  compressed context, then HTTP 200 with the configured fallback message (or a Bedrock answer when
  configured) in chat-completion shape, ``finish_reason: "fallback"`` and header ``X-Gateway-Fallback``;
  a stream that breaks mid-way ends with such a fallback chunk and ``data: [DONE]``;
- past ``breaker.request_deadline_s`` (below SageMaker's 60 s): HTTP 504 ``deadline_exceeded``, or for a stream a
  last chunk with ``finish_reason: "deadline_exceeded"`` and ``data: [DONE]``; the engine request is aborted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from starlette.responses import JSONResponse, Response

from fleetops.metrics import MetricName
from gateway import openai_wire as wire
from gateway.config import RequestLimits
from gateway.errors import ErrorCode, FallbackReason, GatewayError, count_error
from gateway.protocol import InvocationRequest, check_limits, parse_invocation
from gateway.relay import RelayResponse
from gateway.upstream import UpstreamError, UpstreamResponse

if TYPE_CHECKING:
    from gateway.config import ContainmentConfig
    from gateway.metrics import GatewayMetrics
    from gateway.prompt import BuiltPrompt, PromptBuilder
    from gateway.routing import Router
    from gateway.supervisor import Engine
    from gateway.upstream import Upstream

logger = logging.getLogger(__name__)

#: A fallback answerer (e.g. Bedrock): messages in, text out.
FallbackModel = Callable[[list[dict[str, str]], int], Awaitable[str]]

_JSON = {"content-type": "application/json"}

#: Threads that parse and tokenise requests; the tokenizer releases the GIL, so they run beside the loop.
PREPARE_THREADS = 4


class _Call(NamedTuple):
    request: InvocationRequest
    adapter: str
    built: BuiltPrompt
    headers: dict[str, str]
    started: float
    deadline: float


@dataclass(frozen=True)
class Failure:
    reason: FallbackReason
    detail: str


class InvocationService:
    """Serves ``/invocations`` against the engine, with the budget, routing, deadline, retry and fallback applied."""

    def __init__(
        self,
        builder: PromptBuilder,
        router: Router,
        engine: Engine,
        *,
        upstream: Upstream,
        metrics: GatewayMetrics,
        containment: ContainmentConfig,
        backend_version: str,
        limits: RequestLimits | None = None,
        fallback_model: FallbackModel | None = None,
    ) -> None:
        self.builder = builder
        self.router = router
        self.engine = engine
        self.upstream = upstream
        self.metrics = metrics
        self.containment = containment
        self.backend_version = backend_version
        self.fallback_model = fallback_model
        self.limits = limits or RequestLimits()
        # Its own few threads: a burst of long prompts must not take the loop's default executor.
        self._prepare_pool = ThreadPoolExecutor(max_workers=PREPARE_THREADS, thread_name_prefix="prepare")

    async def invoke(self, raw: bytes, started: float) -> Response:
        """Answer one invocation (``started`` is ``time.perf_counter()`` at arrival)."""
        self.metrics.increment(MetricName.REQUESTS)
        try:
            # Off the event loop: a long prompt takes the tokenizer a while, and /ping (2 s) and the
            # streams in flight must not wait for it.
            loop = asyncio.get_running_loop()
            request, adapter, built = await loop.run_in_executor(self._prepare_pool, self._prepare, raw)
        except GatewayError as exc:
            return wire.error_response(exc, self.metrics)
        if built.trimmed:
            self.metrics.increment(MetricName.BUDGET_TRIMS)
        self.metrics.observe(MetricName.TOKENS_IN, built.prompt_tokens)
        headers = self._headers(adapter, built)
        deadline = started + self.containment.request_deadline_s
        call = _Call(request, adapter, built, headers, started, deadline)
        return await (self._stream(call) if request.stream else self._plain(call))

    def _prepare(self, raw: bytes) -> tuple[InvocationRequest, str, BuiltPrompt]:
        """Parse, check the limits, route and fit the budget (runs in :attr:`_prepare_pool`)."""
        request = parse_invocation(raw)
        check_limits(request, self.limits)
        return request, self.router.resolve(request), self.builder.build(request)

    # ---------------------------------------------------------------- the engine call
    async def _open(self, call: _Call) -> UpstreamResponse | Response:
        """Send to the engine; on failure retry once with a compressed context, then the fallback answer.

        Returns the engine's open 200 response, or the final answer (4xx pass-through, deadline, fallback).
        """
        request, adapter, built, headers, _, deadline = call
        failure: Failure | None = None
        for attempt in range(2):
            if attempt and not self._retry(failure):
                break
            if attempt:
                built = self.builder.build(request, compressed=True)
            if not self.engine.available:
                failure = Failure(FallbackReason.ENGINE_UNAVAILABLE, f"engine is {self.engine.state}")
                continue
            try:
                response = await self.upstream.request(
                    "POST",
                    f"{self.engine.base_url}/v1/chat/completions",
                    wire.chat_request(request.passthrough, adapter, built.messages, built.max_tokens, request.stream),
                    _JSON,
                    max(deadline - time.perf_counter(), 0.001),
                )
            except TimeoutError:
                return self._deadline_plain(adapter)
            except UpstreamError as exc:
                failure = self._engine_failed(Failure(FallbackReason.ENGINE_UNAVAILABLE, repr(exc)))
                continue
            if response.status == 200:
                if request.stream:  # the engine accepted and scheduled it (its SSE headers come at once)
                    self.metrics.observe(MetricName.QUEUE_WAIT, (time.perf_counter() - call.started) * 1000)
                return response
            content = await response.read()
            if response.status < 500:
                # vLLM refused a pass-through field (e.g. a bad temperature): its message, its status.
                self.metrics.increment(MetricName.CLIENT_ERRORS)
                return Response(content, response.status, headers, "application/json")
            failure = self._engine_failed(_classify(response.status, content))
        return await self._fallback(call, built, failure)

    async def _plain(self, call: _Call) -> Response:
        opened = await self._open(call)
        if isinstance(opened, Response):
            return opened
        try:
            content = await opened.read()
        except TimeoutError:
            return self._deadline_plain(call.adapter)
        except UpstreamError as exc:
            self._engine_failed(Failure(FallbackReason.ENGINE_UNAVAILABLE, repr(exc)))
            return await self._fallback(call, call.built, None)
        self._observe_done(call.started, wire.completion_tokens(content))
        return Response(wire.with_backend(content, self._meta(call.adapter)), 200, call.headers, "application/json")

    async def _stream(self, call: _Call) -> Response:
        opened = await self._open(call)
        if isinstance(opened, Response):
            return opened
        return RelayResponse(self._relay(opened, call), 200, call.headers, "text/event-stream")

    def _deadline_plain(self, adapter: str) -> JSONResponse:
        message = f"the request did not finish within {self.containment.request_deadline_s:g} s and was cut off"
        return wire.error_response(GatewayError(ErrorCode.DEADLINE_EXCEEDED, message, adapter=adapter), self.metrics)

    async def _fallback(self, call: _Call, built: BuiltPrompt, failure: Failure | None) -> Response:
        reason = failure.reason if failure else FallbackReason.ENGINE_UNAVAILABLE
        text, source = await self._fallback_text(built)
        self._count_fallback()
        note = {"version": source, "adapter": None, "fallback_reason": reason}
        headers = {"X-Gateway-Fallback": reason, "X-Backend-Version": source}
        if call.request.stream:
            events = wire.last_events(call.adapter, text, wire.FINISH_FALLBACK, note)
            return Response(events, 200, headers, "text/event-stream")
        return JSONResponse(wire.completion(call.adapter, text, wire.FINISH_FALLBACK, note), 200, headers)

    async def _relay(self, response: UpstreamResponse, call: _Call) -> AsyncIterator[bytes]:
        """Pass the engine's SSE bytes through untouched, except the backend note in the first event."""
        tokens_out, first = 0, True
        meta = self._meta(call.adapter)
        try:
            async with asyncio.timeout(max(call.deadline - time.perf_counter(), 0.001)):
                async for raw in response.chunks():
                    chunk = wire.with_backend_in_first_event(raw, meta) if first else raw
                    first = False
                    marks = chunk.count(wire.CONTENT_MARK)
                    if marks and not tokens_out:
                        ttft = (time.perf_counter() - call.started) * 1000
                        self.metrics.observe(MetricName.TIME_TO_FIRST_TOKEN, ttft)
                    tokens_out += marks
                    yield chunk
        except TimeoutError:
            count_error(ErrorCode.DEADLINE_EXCEEDED, self.metrics)
            yield wire.last_events(call.adapter, "", wire.FINISH_DEADLINE, json.loads(meta))
            return
        except UpstreamError as exc:
            # The engine died mid-stream: what was sent stays sent; end with the documented fallback chunk.
            self._engine_failed(Failure(FallbackReason.ENGINE_UNAVAILABLE, repr(exc)))
            self._count_fallback()
            note = {**json.loads(meta), "fallback_reason": FallbackReason.ENGINE_UNAVAILABLE}
            yield wire.last_events(call.adapter, self.containment.fallback_message, wire.FINISH_FALLBACK, note)
            return
        finally:
            response.close()
        self._observe_done(call.started, tokens_out)

    # ---------------------------------------------------------------- helpers
    def _retry(self, failure: Failure | None) -> bool:
        return self.containment.retry_with_compressed_context and failure is not None

    def _engine_failed(self, failure: Failure) -> Failure:
        """An engine call failed (an error answer, out of memory included, or a refused or lost connection).

        ``BreakerTrips`` counts exactly these calls, so a request whose retry fails too counts twice; a
        request that finds the engine already down is not a call (it counts only in ``Fallbacks``), and an
        engine death with no request on it shows in ``EngineRestarts``.
        """
        self.metrics.increment(MetricName.BREAKER_TRIPS)
        if failure.reason is FallbackReason.ENGINE_OOM:
            self.metrics.increment(MetricName.OOM_CAUGHT)
        self.engine.report_failure()
        return failure

    def _count_fallback(self) -> None:
        self.metrics.increment(MetricName.FALLBACKS)
        self.metrics.increment(MetricName.REQUEST_ERRORS)

    async def _fallback_text(self, built: BuiltPrompt) -> tuple[str, str]:
        if self.fallback_model is not None:
            try:
                return await self.fallback_model(built.messages, built.max_tokens), "bedrock"
            except Exception as exc:  # any failure of the fallback model: the configured message still answers
                self.metrics.increment(MetricName.BEDROCK_FALLBACK_ERRORS)
                # The error's name only: a service's message may quote the request, and prompts stay out of logs.
                error = _error_name(exc)
                logger.warning(
                    "fallback model failed: error=%s; answering with the fallback message",
                    error,
                    extra={"event": "fallback_model_failed", "error": error, "error_class": type(exc).__name__},
                )
        return self.containment.fallback_message, "fallback"

    def _meta(self, adapter: str) -> bytes:
        return json.dumps({"version": self.backend_version, "adapter": adapter}).encode()

    def _headers(self, adapter: str, built: BuiltPrompt) -> dict[str, str]:
        return {
            "X-Backend-Version": self.backend_version,
            "X-Adapter": adapter,
            "X-Prompt-Tokens": str(built.prompt_tokens),
            "X-Dropped-Turns": str(built.dropped_turns),
            "X-Amzn-SageMaker-Custom-Attributes": f"backend_version={self.backend_version},adapter={adapter}",
        }

    def _observe_done(self, started: float, tokens_out: int) -> None:
        self.metrics.observe(MetricName.REQUEST_LATENCY, (time.perf_counter() - started) * 1000)
        self.metrics.observe(MetricName.TOKENS_OUT, tokens_out)


def _error_name(exc: Exception) -> str:
    """The exception's class, with the service's error code when it carries one (botocore's ``ClientError``).

    Examples
    --------
    >>> class ClientError(Exception):
    ...     response = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
    >>> _error_name(ClientError("quoted request")), _error_name(KeyError("output"))
    ('ClientError(ThrottlingException)', 'KeyError')
    """
    response = getattr(exc, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    code = error.get("Code") if isinstance(error, dict) else None
    return f"{type(exc).__name__}({code})" if code else type(exc).__name__


def _classify(status: int, content: bytes) -> Failure:
    text = content[:2000].decode("utf-8", "replace")
    lowered = text.lower()
    if "out of memory" in lowered or "outofmemory" in lowered:
        return Failure(FallbackReason.ENGINE_OOM, text)
    return Failure(FallbackReason.ENGINE_ERROR, f"HTTP {status}: {text}")
