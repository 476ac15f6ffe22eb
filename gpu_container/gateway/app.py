"""The HTTP surface on :8080: ``/ping``, ``/invocations``, two OpenAI routes, and the drain.

``/ping`` never touches the engine: it reads flags the supervisor and warm-up keep up to date, so it
answers in well under a millisecond (SageMaker allows 2 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.errors import ErrorCode, GatewayError
from gateway.openai_wire import error_response
from gateway.relay import RelayResponse
from gateway.request_log import RequestLog
from gateway.supervisor import EngineState
from gateway.upstream import Upstream, UpstreamError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from starlette.requests import Request

    from gateway.config import GatewayConfig
    from gateway.gpu_health import GpuHealthMonitor
    from gateway.serving import InvocationService
    from gateway.supervisor import Engine

logger = logging.getLogger(__name__)


#: What a client may call (named in the 404 answer).
ROUTES = "GET /ping, POST /invocations, POST /v1/chat/completions, GET /v1/models"


@dataclass
class GatewayState:
    """Flags ``/ping`` reads, and the in-flight count the drain waits on."""

    warmed: bool = False
    draining: bool = False
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def enter(self) -> None:
        self.in_flight += 1
        self.idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self.idle.set()

    async def drain(self, window_s: float) -> bool:
        """Stop taking work and wait for in-flight requests (and streams) to finish; True if all did."""
        self.draining = True
        if self.in_flight == 0:
            return True
        try:
            await asyncio.wait_for(self.idle.wait(), timeout=window_s)
        except TimeoutError:
            return False
        return True


class Gateway:
    """Wires the pieces into a Starlette app."""

    def __init__(
        self,
        config: GatewayConfig,
        engine: Engine,
        service: InvocationService,
        client: httpx.AsyncClient,
        upstream: Upstream,
        background: list[Any] | None = None,
        gpu_health: GpuHealthMonitor | None = None,
    ) -> None:
        self.config = config
        self.engine = engine
        self.service = service
        self.client = client
        self.upstream = upstream
        self.state = GatewayState()
        self.background = background or []  # things with async start()/stop() (the metrics agent)
        self.request_log = RequestLog(service.backend_version, config.system_prompt.version, service.metrics)
        self.gpu_health = gpu_health  # started among the background items; its verdict only is read here

    def healthy(self) -> bool:
        # Bounded restarts keep /ping at 200: only "never ready", "gave up", a failed GPU and draining say 503.
        if self.state.draining or not self.state.warmed or self._gpu_problem() is not None:
            return False
        return self.engine.state in (EngineState.READY, EngineState.RESTARTING)

    async def ping(self, request: Request) -> Response:
        if self.healthy():
            return Response(b"", 200)
        status = self._status()
        body = {"status": status}
        gpu_problem = self._gpu_problem()
        if status == "gpu_unhealthy" and gpu_problem is not None:
            body["reason"] = gpu_problem  # what on-call reads in the health-check failure
        return JSONResponse(body, 503)

    def _gpu_problem(self) -> str | None:
        return None if self.gpu_health is None else self.gpu_health.unhealthy_reason

    def _status(self) -> str:
        if self.state.draining:
            return "draining"
        if self._gpu_problem() is not None:
            return "gpu_unhealthy"
        if self.engine.state is EngineState.FAILED:
            return "engine_failed"
        return "warming_up" if self.engine.state is not EngineState.STOPPED else "stopped"

    async def invocations(self, request: Request) -> Response:
        started = time.perf_counter()
        trace = self.request_log.begin(request.headers, started)
        response = await self._serve(request, lambda body: self.service.invoke(body, started, trace))
        return self.request_log.finish(trace, response)  # X-Request-Id on every answer; one log line each

    async def models(self, request: Request) -> Response:
        """``GET /v1/models`` for OpenAI clients: the engine's list, from a fixed engine path."""
        if not self.state.draining and not self.engine.available:  # draining answers first, in _serve
            return self._refuse(
                GatewayError(ErrorCode.ENGINE_UNAVAILABLE, f"the engine is {self.engine.state}; retry shortly")
            )
        return await self._serve(request, self._models)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        """Every other path, ``/v1/..`` and encoded forms included: answered here, never sent to the engine."""
        return self._refuse(GatewayError(ErrorCode.NOT_FOUND, f"no such route; the routes are {ROUTES}"))

    async def _serve(self, request: Request, answer: Callable[[bytes], Awaitable[Response]]) -> Response:
        """Refuse new work while draining; otherwise read the body and count the request in flight
        until its answer, or its stream, is over (the drain waits on that count)."""
        if self.state.draining:
            return self._refuse(GatewayError(ErrorCode.DRAINING))
        self.state.enter()
        streaming = False
        try:
            try:
                body = await self._read_body(request)
            except GatewayError as exc:
                return self._refuse(exc)
            response = await answer(body)
            streaming = self._hold_until_streamed(response)
            return response
        finally:
            if not streaming:
                self.state.leave()

    async def _read_body(self, request: Request) -> bytes:
        limit = self.config.server.max_body_bytes
        too_large = GatewayError(ErrorCode.PAYLOAD_TOO_LARGE, f"request body over the {limit}-byte limit", limit=limit)
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_large
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    async def _models(self, body: bytes) -> Response:
        url = f"{self.engine.base_url}/v1/models"  # never built from the client's path
        try:
            response = await self.upstream.request(
                "GET", url, None, {"accept": "application/json"}, self.config.containment.request_deadline_s
            )
            content = await response.read()
        except (TimeoutError, *UpstreamError):
            self.engine.report_failure()
            # No exception text: it names the engine's internal address.
            return self._refuse(GatewayError(ErrorCode.ENGINE_UNAVAILABLE))
        return Response(content, response.status, media_type="application/json")

    def _refuse(self, error: GatewayError) -> Response:
        return error_response(error, self.service.metrics)

    def _hold_until_streamed(self, response: Response) -> bool:
        """Keep a streaming response counted as in flight until its last byte (the drain waits for it)."""
        if not isinstance(response, RelayResponse):
            return False
        response.on_close = self.state.leave
        return True

    def build_app(self) -> Starlette:
        routes = [
            Route("/ping", self.ping, methods=["GET"]),
            Route("/invocations", self.invocations, methods=["POST"]),
            # The OpenAI routes this image serves, as exact paths: chat completions is /invocations itself
            # (same allow-list, budget and deadline); nothing else of the engine is reachable.
            Route("/v1/chat/completions", self.invocations, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
        ]
        return Starlette(routes=routes, lifespan=self._lifespan, exception_handlers={404: self.not_found})

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.upstream.start()
        await self.engine.start()
        for item in self.background:
            await item.start()
        try:
            yield
        finally:
            for item in self.background:
                with contextlib.suppress(Exception):
                    await item.stop()
            await self.engine.stop()
            await self.upstream.stop()
            await self.client.aclose()
            logger.info("stopped")
