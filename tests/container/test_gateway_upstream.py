"""The gateway's pooled client to the engine, against a real local HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from gateway import upstream
from gateway.upstream import Upstream, UpstreamError

pytestmark = pytest.mark.container

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _serve(path: str, handler: Handler) -> tuple[web.AppRunner, int]:
    """``handler`` on ``POST path`` of a local server on a free port; the caller cleans the runner up."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def _slow(request: web.Request) -> web.Response:
    await asyncio.sleep(1.0)
    return web.Response(text="done")


async def _second_request_while_the_only_connection_is_busy() -> BaseException | None:
    runner, port = await _serve("/slow", _slow)
    pool = Upstream(max_connections=1)
    await pool.start()
    url = f"http://127.0.0.1:{port}/slow"
    try:
        busy = asyncio.create_task(pool.request("POST", url, b"", {}, timeout_s=5))
        await asyncio.sleep(0.1)
        try:
            await pool.request("POST", url, b"", {}, timeout_s=5)
        except BaseException as exc:
            return exc
        finally:
            await (await busy).read()
        return None
    finally:
        await pool.stop()
        await runner.cleanup()


def test_no_connection_to_the_engine_in_time_is_an_engine_failure_not_a_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connect timeout is also a TimeoutError in aiohttp; answered as one, users got "deadline exceeded" (504)
    a second into their request. It must take the engine-failure path: retry, then the documented fallback."""
    monkeypatch.setattr(upstream, "CONNECT_TIMEOUT_S", 0.2)

    error = asyncio.run(_second_request_while_the_only_connection_is_busy())

    assert isinstance(error, UpstreamError) and not isinstance(error, TimeoutError), repr(error)
    assert "did not take the connection within 0.2 s" in str(error)


async def _stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for n in range(3):
        await response.write(f"data: {n}\n\n".encode())
        await asyncio.sleep(0.01)
    await response.write_eof()
    return response


async def _streams_relayed_one_after_another(count: int) -> tuple[list[bytes], set[int]]:
    ports: set[int] = set()

    async def stream(request: web.Request) -> web.StreamResponse:
        ports.add(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        return await _stream(request)

    runner, port = await _serve("/stream", stream)
    pool = Upstream()
    await pool.start()
    bodies = []
    try:
        for _ in range(count):
            response = await pool.request("POST", f"http://127.0.0.1:{port}/stream", b"{}", {}, timeout_s=5)
            try:
                bodies.append(b"".join([chunk async for chunk in response.chunks()]))
            finally:
                response.close()  # as the relay does, however the stream ended
        return bodies, ports
    finally:
        await pool.stop()
        await runner.cleanup()


def test_streams_relayed_to_the_end_keep_their_engine_connection_for_the_next_request() -> None:
    """A stream read to its end and closed gives its connection back to the pool: a new connection per request
    would add a TCP handshake to every request's latency (and a socket in TIME_WAIT)."""
    bodies, ports = asyncio.run(_streams_relayed_one_after_another(4))

    assert bodies == [b"data: 0\n\ndata: 1\n\ndata: 2\n\n"] * 4
    assert len(ports) == 1, f"{len(ports)} connections for 4 requests in a row"
