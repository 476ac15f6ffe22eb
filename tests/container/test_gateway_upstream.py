"""The gateway's pooled client to the engine, against a real local HTTP server."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from gateway import upstream
from gateway.upstream import Upstream, UpstreamError

pytestmark = pytest.mark.container


async def _slow(request: web.Request) -> web.Response:
    await asyncio.sleep(1.0)
    return web.Response(text="done")


async def _second_request_while_the_only_connection_is_busy() -> BaseException | None:
    app = web.Application()
    app.router.add_post("/slow", _slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
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
