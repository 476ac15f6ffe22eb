"""A recording HTTP proxy between a gateway and its engine: what the gateway really sent, and what came back.

Tests put it in front of the real engine (``ENGINE_URL`` of the gateway points at it) to check the prompt the
engine received (the summary slot's place and bytes, the summary calls and their bounds) without any debug
route in the gateway. Every request is forwarded as it is; answers are read whole and passed back (a stream
arrives at once, which the gateway's relay handles like any fast engine).

    with RecordingProxy(engine.base_url) as proxy, start_gateway(tiny, work, engine_url=proxy.url) as gw:
        ...
        proxy.chat_bodies()  # every /v1/chat/completions body, in order
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

#: Hop-by-hop headers a proxy must not pass on (RFC 9110), plus the length it sets itself.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


@dataclass(frozen=True)
class Exchange:
    """One forwarded request: its path, its JSON body (``None`` when not JSON), the answer's status and bytes."""

    path: str
    body: dict[str, Any] | None
    status: int
    answer: bytes


class RecordingProxy:
    """Forwards everything to ``target`` on a free loopback port and records each exchange."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=120)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the gateway's pooled client expects

            def do_GET(self) -> None:
                proxy._forward(self, "GET")

            def do_POST(self) -> None:
                proxy._forward(self, "POST")

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def chat_bodies(self) -> list[dict[str, Any]]:
        """The bodies of every chat completion forwarded so far, in order."""
        with self._lock:
            return [e.body for e in self.exchanges if e.path == "/v1/chat/completions" and e.body is not None]

    def chat_exchanges(self) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.path == "/v1/chat/completions"]

    def _forward(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP and k.lower() != "host"}
        try:
            response = self._client.request(method, self.target + handler.path, content=raw or None, headers=headers)
            status, content, answer_headers = response.status_code, response.content, response.headers
        except httpx.HTTPError:
            status, content, answer_headers = 502, b"", httpx.Headers()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.exchanges.append(Exchange(handler.path, body if isinstance(body, dict) else None, status, content))
        handler.send_response(status)
        for key, value in answer_headers.items():
            if key.lower() not in _HOP:
                handler.send_header(key, value)
        handler.send_header("content-length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)
