"""The hot path to the engine: one pooled aiohttp session (C HTTP parser, already in the vLLM image).

The gateway relays every generated token; parsing the engine's chunked SSE stream in pure Python
(h11, as httpx does) costs enough CPU on a shared host to show in throughput. aiohttp's llhttp parser
keeps the relay cheap. Health checks and warm-up stay on httpx (a few requests a second).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp

#: Any failure to reach the engine or to read its answer (refused, reset, cut mid-body).
UpstreamError = (aiohttp.ClientError, ConnectionError)


@dataclass
class UpstreamResponse:
    status: int
    headers: dict[str, str]
    response: aiohttp.ClientResponse

    async def read(self) -> bytes:
        try:
            return await self.response.read()
        finally:
            self.response.release()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives (several SSE events per chunk when the engine is ahead of us)."""
        try:
            async for chunk in self.response.content.iter_any():
                yield chunk
        finally:
            self.response.close()

    def close(self) -> None:
        self.response.close()


class Upstream:
    """A pooled connection to the engine; created inside the running event loop (:meth:`start`)."""

    def __init__(self, max_connections: int = 1024) -> None:
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=self.max_connections, keepalive_timeout=60, enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, skip_auto_headers=["User-Agent"]
        )

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("Upstream.start() was not awaited")
        return self._session

    async def request(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], timeout_s: float | None
    ) -> UpstreamResponse:
        """Send a request and return once the status and headers are in (the body is read by the caller).

        Raises
        ------
        TimeoutError
            Past ``timeout_s`` (the whole exchange, body included).
        aiohttp.ClientError
            The engine cannot be reached or broke the connection.
        """
        timeout = aiohttp.ClientTimeout(total=timeout_s, connect=2.0)
        response = await self.session.request(method, url, data=body, headers=headers, timeout=timeout)
        return UpstreamResponse(response.status, dict(response.headers), response)

    async def post_json(self, url: str, body: bytes, timeout_s: float) -> tuple[int, bytes]:
        response = await self.request("POST", url, body, {"content-type": "application/json"}, timeout_s)
        return response.status, await response.read()
