"""The relayed stream's end: its log line and drain count once, and its objects freed as it ends."""

from __future__ import annotations

import asyncio
import gc
import io
import json
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from gateway.metrics import GatewayMetrics
from gateway.relay import RelayResponse
from gateway.request_log import RequestLog, RequestTrace

if TYPE_CHECKING:
    from starlette.types import Message


def test_a_finished_stream_is_freed_by_reference_counting_alone() -> None:
    """No reference cycle is left: what a stream held goes as it ends, not at the cyclic collector's next full
    pass, which walks every object in the process while the event loop (and every stream on it) waits."""
    out, ended = io.StringIO(), []

    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: {}\n\n"

    async def serve() -> tuple[weakref.ref[RelayResponse], list[Message]]:
        relay = RelayResponse(chunks(), 200)
        relay.on_close = lambda: ended.append("drain")  # as the gateway counts a stream in flight
        RequestLog("v7", "prompt-1", GatewayMetrics(), out).finish(RequestTrace("req-1", 0.0), relay)
        sent: list[Message] = []

        async def receive() -> dict[str, Any]:
            await asyncio.Event().wait()  # the client stays to the end
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            sent.append(message)

        await relay({"type": "http"}, receive, send)
        return weakref.ref(relay), sent

    gc.collect()
    gc.disable()
    try:
        relay, sent = asyncio.run(serve())
        assert relay() is None, "the finished response is still alive: a reference cycle holds it"
    finally:
        gc.enable()
    assert [m.get("body") for m in sent] == [None, b"data: {}\n\n", b""]
    assert ended == ["drain"]  # the drain's count, once
    assert json.loads(out.getvalue())["request_id"] == "req-1"  # the log line, once
