"""The hot path to the engine: one pooled aiohttp session (C HTTP parser, already in the vLLM image).

The gateway relays every generated token; parsing the engine's chunked SSE stream in pure Python
(h11, as httpx does) costs enough CPU on a shared host to show in throughput. aiohttp's llhttp parser
keeps the relay cheap. Health checks and warm-up stay on httpx (a few requests a second).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
import yarl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

#: Any failure to reach the engine or to read its answer (refused, reset, cut mid-body).
UpstreamError = (aiohttp.ClientError, ConnectionError)

#: How long a new connection to the engine (the pool's wait included) may take.
CONNECT_TIMEOUT_S = 2.0
#: How long the gateway reuses an idle connection to the engine.
KEEPALIVE_S = 60
#: How long the engine keeps one open (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``, 5 s by default). It must outlast the
#: gateway's, as a load balancer's backend must: otherwise a request sent on a connection the engine is closing
#: fails with "server disconnected" and counts as an engine failure (seen under load on a busy host).
ENGINE_KEEPALIVE_S = KEEPALIVE_S + 15
#: Parsed engine URLs kept (the gateway calls a handful; a bound all the same).
MAX_CACHED_URLS = 16


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

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives (several SSE events per chunk when the engine is ahead of us).

        aiohttp's own iterator, not a generator around it: one layer less on every relayed chunk. The caller
        closes the response (:meth:`close`) however the stream ends.
        """
        return self.response.content.iter_any()

    def close(self) -> None:
        self.response.close()


class Upstream:
    """A pooled connection to the engine; created inside the running event loop (:meth:`start`)."""

    def __init__(self, max_connections: int = 1024) -> None:
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, yarl.URL] = {}  # the engine's few fixed URLs, parsed once

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(
            limit=self.max_connections, keepalive_timeout=KEEPALIVE_S, enable_cleanup_closed=True
        )
        # No cookie jar: the engine sets none, and filtering an empty jar still costs every request.
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            skip_auto_headers=["User-Agent"],
            cookie_jar=aiohttp.DummyCookieJar(),
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
        aiohttp.ClientError, ConnectionError
            The engine cannot be reached (in ``CONNECT_TIMEOUT_S``) or broke the connection.
        """
        timeout = aiohttp.ClientTimeout(total=timeout_s, connect=CONNECT_TIMEOUT_S)
        try:
            response = await self.session.request(method, self._url(url), data=body, headers=headers, timeout=timeout)
        except aiohttp.ConnectionTimeoutError as exc:
            # Also a TimeoutError, but the engine is out of reach, not the request out of time: it must take the
            # engine-failure path (retry, fallback), never be answered as "deadline exceeded" seconds into it.
            raise ConnectionError(f"engine did not take the connection within {CONNECT_TIMEOUT_S:g} s") from exc
        return UpstreamResponse(response.status, dict(response.headers), response)

    def _url(self, url: str) -> yarl.URL:
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= MAX_CACHED_URLS:
                self._urls.clear()
            parsed = self._urls[url] = yarl.URL(url)
        return parsed

    async def post_json(self, url: str, body: bytes, timeout_s: float) -> tuple[int, bytes]:
        response = await self.request("POST", url, body, {"content-type": "application/json"}, timeout_s)
        return response.status, await response.read()
