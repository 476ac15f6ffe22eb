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
from gateway.prompt import SlotText
from gateway.protocol import InvocationRequest, check_limits, parse_invocation
from gateway.relay import RelayResponse
from gateway.request_log import RequestTrace, safe_session_id
from gateway.upstream import UpstreamError, UpstreamResponse

if TYPE_CHECKING:
    from gateway.config import ContainmentConfig
    from gateway.metrics import GatewayMetrics
    from gateway.prompt import BuiltPrompt, Draft, PromptBuilder
    from gateway.routing import Router
    from gateway.summary import Pending, Summarizer
    from gateway.supervisor import Engine
    from gateway.upstream import Upstream

logger = logging.getLogger(__name__)

#: A fallback answerer (e.g. Bedrock): messages in, text out.
FallbackModel = Callable[[list[dict[str, str]], int], Awaitable[str]]

_JSON = {"content-type": "application/json"}

#: Threads that parse and tokenise requests; the tokenizer releases the GIL, so they run beside the loop.
PREPARE_THREADS = 4
#: A body up to this size is prepared on the loop: it tokenises in well under a millisecond (and its turns are
#: mostly cached), less than the two thread hand-offs would add to every small request's latency.
INLINE_PREPARE_BYTES = 8192


class _Call(NamedTuple):
    request: InvocationRequest
    adapter: str
    built: BuiltPrompt
    headers: dict[str, str]
    started: float
    deadline: float
    trace: RequestTrace


class _Prepared(NamedTuple):
    """A request parsed, routed and fitted; ``built`` is ``None`` while its summary is ``pending``."""

    request: InvocationRequest
    adapter: str
    draft: Draft
    built: BuiltPrompt | None
    pending: Pending | None


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
        summarizer: Summarizer | None = None,
    ) -> None:
        self.builder = builder
        self.router = router
        self.engine = engine
        self.upstream = upstream
        self.metrics = metrics
        self.containment = containment
        self.backend_version = backend_version
        self.fallback_model = fallback_model
        self.summarizer = summarizer
        self.limits = limits or RequestLimits()
        # Its own few threads: a burst of long prompts must not take the loop's default executor.
        self._prepare_pool = ThreadPoolExecutor(max_workers=PREPARE_THREADS, thread_name_prefix="prepare")

    async def invoke(self, raw: bytes, started: float, trace: RequestTrace | None = None) -> Response:
        """Answer one invocation (``started`` is ``time.perf_counter()`` at arrival; ``trace`` gets what it did)."""
        trace = trace or RequestTrace("", started)
        self.metrics.increment(MetricName.REQUESTS)
        try:
            # A long prompt is prepared off the event loop: the tokenizer takes a while on it, and /ping (2 s)
            # and the streams in flight must not wait.
            if len(raw) <= INLINE_PREPARE_BYTES:
                prepared = self._prepare(raw)
            else:
                prepared = await asyncio.get_running_loop().run_in_executor(self._prepare_pool, self._prepare, raw)
            request, adapter = prepared.request, prepared.adapter
            built = prepared.built or await self._summarized(prepared, started)
        except GatewayError as exc:
            return wire.error_response(exc, self.metrics)
        if built.trimmed:
            self.metrics.increment(MetricName.BUDGET_TRIMS)
        self.metrics.observe(MetricName.TOKENS_IN, built.prompt_tokens)
        trace.stream, trace.session_id, trace.adapter = request.stream, safe_session_id(request.session_id), adapter
        trace.tokens_in, trace.dropped_turns = built.prompt_tokens, built.dropped_turns
        headers = self._headers(adapter, built)
        deadline = started + self.containment.request_deadline_s
        call = _Call(request, adapter, built, headers, started, deadline, trace)
        return await (self._stream(call) if request.stream else self._plain(call))

    def _prepare(self, raw: bytes) -> _Prepared:
        """Parse, check the limits, route and fit the budget (runs in :attr:`_prepare_pool`).

        The prompt is assembled here too, unless its summary slot waits for a summary the model has not
        written yet (the window just slid): that one engine call is made on the loop, by :meth:`_summarized`.
        """
        request = parse_invocation(raw)
        check_limits(request, self.limits)
        adapter = self.router.resolve(request)
        draft = self.builder.draft(request)
        ready = self.summarizer.ready(draft, adapter) if self.summarizer else None
        if ready is None or isinstance(ready, SlotText):
            return _Prepared(request, adapter, draft, self.builder.assemble(draft, ready), None)
        return _Prepared(request, adapter, draft, None, ready)

    async def _summarized(self, prepared: _Prepared, started: float) -> BuiltPrompt:
        """Ask the model for the summary of the turns the window just dropped, then assemble the prompt.

        Bounded by ``summary.timeout_s`` and the request's deadline; a failure leaves the marker in the slot.
        """
        summary = None
        if self.summarizer is not None and prepared.pending is not None and self.engine.available:
            url = f"{self.engine.base_url}/v1/chat/completions"
            left = started + self.containment.request_deadline_s - time.perf_counter()
            summary = await self.summarizer.summarize(
                prepared.pending, lambda body, timeout_s: self.upstream.post_json(url, body, timeout_s), left
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._prepare_pool, self.builder.assemble, prepared.draft, summary)

    # ---------------------------------------------------------------- the engine call
    async def _open(self, call: _Call) -> UpstreamResponse | Response:
        """Send to the engine; on failure retry once with a compressed context, then the fallback answer.

        Returns the engine's open 200 response, or the final answer (4xx pass-through, deadline, fallback).
        """
        request, adapter, built, headers, _, deadline, _ = call
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
                    call.trace.queue_wait_ms = call.trace.elapsed_ms()
                    self.metrics.observe(MetricName.QUEUE_WAIT, call.trace.queue_wait_ms)
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
        call.trace.answered(wire.completion_tokens(content), wire.engine_timings(content))
        self._observe_done(call.trace)
        meta = self._meta(call.adapter, call.built)
        return Response(wire.with_backend(content, meta), 200, call.headers, "application/json")

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
        call.trace.engine_death_cause = self.engine.failure_cause()
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
        meta = self._meta(call.adapter, call.built)
        try:
            async with asyncio.timeout(max(call.deadline - time.perf_counter(), 0.001)):
                async for raw in response.chunks():
                    chunk = wire.with_backend_in_first_event(raw, meta) if first else raw
                    first = False
                    marks = chunk.count(wire.CONTENT_MARK)
                    if marks and not tokens_out:
                        self.metrics.observe(MetricName.TIME_TO_FIRST_TOKEN, call.trace.first_token())
                    tokens_out += marks
                    yield chunk
        except TimeoutError:
            count_error(ErrorCode.DEADLINE_EXCEEDED, self.metrics)
            call.trace.ended_by("deadline")
            yield wire.last_events(call.adapter, "", wire.FINISH_DEADLINE, json.loads(meta))
            return
        except UpstreamError as exc:
            # The engine died mid-stream: what was sent stays sent; end with the documented fallback chunk.
            self._engine_failed(Failure(FallbackReason.ENGINE_UNAVAILABLE, repr(exc)))
            self._count_fallback()
            call.trace.ended_by("fallback", FallbackReason.ENGINE_UNAVAILABLE)
            call.trace.engine_death_cause = self.engine.failure_cause()
            note = {**json.loads(meta), "fallback_reason": FallbackReason.ENGINE_UNAVAILABLE}
            yield wire.last_events(call.adapter, self.containment.fallback_message, wire.FINISH_FALLBACK, note)
            return
        finally:
            response.close()
        call.trace.answered(tokens_out)
        self._observe_done(call.trace)

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

    def _meta(self, adapter: str, built: BuiltPrompt) -> bytes:
        """The answer's ``backend`` note; ``history`` when turns were dropped, ``dropped_chunks`` when evidence was."""
        note: dict[str, object] = {"version": self.backend_version, "adapter": adapter}
        if built.history is not None:
            note["history"] = built.history
        if built.dropped_chunks:
            note["dropped_chunks"] = built.dropped_chunks
        return json.dumps(note).encode()

    def _headers(self, adapter: str, built: BuiltPrompt) -> dict[str, str]:
        return {
            "X-Backend-Version": self.backend_version,
            "X-Adapter": adapter,
            "X-Prompt-Tokens": str(built.prompt_tokens),
            "X-Dropped-Turns": str(built.dropped_turns),
            "X-History": built.history_header,
            "X-Dropped-Chunks": str(built.dropped_chunks),
            "X-Amzn-SageMaker-Custom-Attributes": f"backend_version={self.backend_version},adapter={adapter}",
        }

    def _observe_done(self, trace: RequestTrace) -> None:
        """An engine answer is complete. A stream's TTFT and queue wait were observed as they happened; a plain
        answer's come from the engine's own timings (absent when the engine gave none)."""
        self.metrics.observe(MetricName.REQUEST_LATENCY, trace.latency_ms or 0.0)
        self.metrics.observe(MetricName.TOKENS_OUT, trace.tokens_out or 0)
        if trace.generation_ms is not None:
            self.metrics.observe(MetricName.GENERATION_TIME, trace.generation_ms)
        if not trace.stream:
            if trace.queue_wait_ms is not None:
                self.metrics.observe(MetricName.QUEUE_WAIT, trace.queue_wait_ms)
            if trace.ttft_ms is not None:
                self.metrics.observe(MetricName.TIME_TO_FIRST_TOKEN, trace.ttft_ms)


def _error_name(exc: Exception) -> str:
    """The exception's class, with the service's error code when it carries another one (botocore's generic
    ``ClientError``; a modelled error's class is its code already).

    Examples
    --------
    >>> class ClientError(Exception):
    ...     response = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
    >>> class ThrottlingException(ClientError):
    ...     pass
    >>> _error_name(ClientError("quoted request")), _error_name(ThrottlingException()), _error_name(KeyError("x"))
    ('ClientError(ThrottlingException)', 'ThrottlingException', 'KeyError')
    """
    name = type(exc).__name__
    response = getattr(exc, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    code = error.get("Code") if isinstance(error, dict) else None
    return f"{name}({code})" if code and code != name else name


def _classify(status: int, content: bytes) -> Failure:
    text = content[:2000].decode("utf-8", "replace")
    lowered = text.lower()
    if "out of memory" in lowered or "outofmemory" in lowered:
        return Failure(FallbackReason.ENGINE_OOM, text)
    return Failure(FallbackReason.ENGINE_ERROR, f"HTTP {status}: {text}")
