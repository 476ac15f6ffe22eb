"""The least a Python proxy on the gateway's stack can do: the floor its added latency is measured against.

One raw ASGI app under uvicorn (uvloop, httptools, as ``python -m gateway serve`` runs), one pooled aiohttp session
to the upstream (as :mod:`gateway.upstream`): it reads the client's body, posts it unchanged to the upstream's
``/v1/chat/completions`` and relays the answer's chunks as they arrive. No parsing, no budget, no routing, no
metrics, no logs. What a request through it takes beyond a request straight to the upstream is the cost of one
more process and one more HTTP hop on this stack; ``bench/gateway_overhead.py`` measures it beside the gateway.

Run as a process::

    python -m devtools.bare_proxy --port 8200 --upstream http://127.0.0.1:8100
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import aiohttp
import uvicorn

from devtools.emulator import free_port
from devtools.local_serving import PYTHONPATH, Process, wait_http

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator
    from pathlib import Path

    Receive = Callable[[], Awaitable[dict[str, Any]]]
    Send = Callable[[dict[str, Any]], Awaitable[None]]

_JSON = {"content-type": "application/json"}


class BareProxy:
    """A raw ASGI app: ``POST`` anything goes to ``upstream``'s chat completions; ``GET`` answers 200."""

    def __init__(self, upstream: str) -> None:
        self.url = f"{upstream.rstrip('/')}/v1/chat/completions"
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["method"] != "POST" or self.session is None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        async with self.session.post(self.url, data=body, headers=_JSON) as upstream:
            content_type = upstream.headers.get("content-type", "application/json").encode()
            headers = [(b"content-type", content_type)]
            await send({"type": "http.response.start", "status": upstream.status, "headers": headers})
            async for chunk in upstream.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                connector = aiohttp.TCPConnector(limit=1024, keepalive_timeout=60)
                self.session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.session is not None:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


@contextlib.contextmanager
def start_bare_proxy(upstream: str, logs: Path, cpus: set[int] | None = None) -> Iterator[tuple[str, Process]]:
    """Start the proxy in front of ``upstream`` on a free loopback port (``cpus`` pins it); yields (its URL, it)."""
    port = free_port()
    command = [sys.executable, "-m", "devtools.bare_proxy", "--port", str(port), "--upstream", upstream]
    logs.mkdir(parents=True, exist_ok=True)
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    out, err = logs / f"bare-proxy-{port}.stdout", logs / f"bare-proxy-{port}.stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        popen = subprocess.Popen(
            command, env={**os.environ, "PYTHONPATH": PYTHONPATH}, stdout=stdout, stderr=stderr,
            start_new_session=True, preexec_fn=pin,  # noqa: PLW1509 - one syscall between fork and exec
        )  # fmt: skip
    process = Process(popen, out, err)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 60, process)
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.kill_group()
        popen.wait(timeout=10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args(argv)
    uvicorn.run(
        BareProxy(args.upstream),
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        backlog=1024,
    )


if __name__ == "__main__":
    main()
