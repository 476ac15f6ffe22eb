"""A lean streaming response: engine bytes go straight to the ASGI server, one ``send`` per chunk.

Starlette's ``StreamingResponse`` adds a task group and generator layers per response; at thousands of
relayed chunks a second on a shared host that CPU comes out of the engine. This sends directly, watches
for the client going away in one small task (so an abandoned stream stops and frees the engine), and
calls ``on_close`` exactly once when the stream is over, however it ended (the drain waits on it).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from starlette.responses import Response

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping

    from starlette.types import Receive, Scope, Send


class RelayResponse(Response):
    """Stream ``chunks`` to the client.

    Parameters
    ----------
    chunks
        The body, as it arrives from the engine.
    status_code, headers, media_type
        As for any Starlette response.
    """

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
    ) -> None:
        self.chunks = chunks
        self.status_code = status_code
        self.media_type = media_type
        self.background = None
        self.on_close: Callable[[], None] | None = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        relay = asyncio.current_task()
        finished = gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            if not finished and relay is not None:
                gone = True
                relay.cancel()  # the client went away: stop reading from the engine

        watcher = asyncio.ensure_future(watch())
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            finished = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone or relay is None:
                raise
            relay.uncancel()  # our own cancellation: the client left, nothing to report
        finally:
            finished = True
            watcher.cancel()
            with contextlib.suppress(Exception):
                await self.chunks.aclose()  # type: ignore[attr-defined]
            # Dropped before the call: a callback that refers back to this response (the request log's does)
            # would otherwise hold it in a reference cycle, and every stream's objects would wait for the
            # cyclic garbage collector, whose full passes stall the event loop for tens of milliseconds.
            on_close, self.on_close = self.on_close, None
            if on_close is not None:
                on_close()
