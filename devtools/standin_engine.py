"""A fast stand-in for vLLM's OpenAI server: the upstream against which the gateway's own cost is measured.

Not an engine: no model, no scheduler, no queue. It answers what the gateway asks of an engine, shaped as vLLM
shapes it, at once and at a fixed pace, so that what a request through the gateway takes beyond a request
straight to it is the gateway's doing (``bench/gateway_overhead.py``):

- ``GET /health``: 200; ``GET /metrics``: an empty Prometheus exposition; ``GET /v1/models``: the one model;
- ``POST /v1/chat/completions``: ``min(max_tokens, tokens)`` tokens, as a JSON answer with ``usage``, or with
  ``"stream": true`` as vLLM's SSE events (the role event, one event per token ``interval_s`` apart, the
  finishing event, ``[DONE]``).

Run as a process (:func:`devtools.local_serving.start_standin_engine` does)::

    python -m devtools.standin_engine --port 8100 --tokens 16 --interval-s 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from aiohttp import web

MODEL = "standin"


def event(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    """One ``chat.completion.chunk`` SSE event as vLLM writes it.

    Examples
    --------
    >>> event({"content": " manga"})[:6]
    b'data: '
    >>> b'"delta":{"content":" manga"}' in event({"content": " manga"})
    True
    """
    chunk = {
        "id": "chatcmpl-standin",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def answer(tokens: int) -> bytes:
    """A non-streamed ``chat.completion`` of ``tokens`` tokens, with ``usage``."""
    body = {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": " manga" * tokens},
                "logprobs": None,
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens},
    }
    return json.dumps(body, separators=(",", ":")).encode()


def application(tokens: int, interval_s: float) -> web.Application:
    """The stand-in's routes: at most ``tokens`` tokens per answer, streamed ``interval_s`` apart."""
    first = event({"role": "assistant", "content": ""})
    token = event({"content": " manga"})
    last = event({}, finish_reason="length") + b"data: [DONE]\n\n"

    async def ok(request: web.Request) -> web.Response:
        return web.Response(body=b"")

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=b"", content_type="text/plain")

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        payload = json.loads(await request.read())
        count = min(int(payload.get("max_tokens") or tokens), tokens)
        if not payload.get("stream"):
            return web.Response(body=answer(count), content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(first)
        for _ in range(count):
            if interval_s > 0:
                await asyncio.sleep(interval_s)
            await response.write(token)
        await response.write(last)
        await response.write_eof()
        return response

    app = web.Application()
    app.add_routes(
        [
            web.get("/health", ok),
            web.get("/metrics", metrics),
            web.get("/v1/models", models),
            web.post("/v1/chat/completions", chat),
        ]
    )
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--interval-s", type=float, default=0.05)
    args = parser.parse_args(argv)
    web.run_app(
        application(args.tokens, args.interval_s),
        host=args.host,
        port=args.port,
        access_log=None,
        print=None,
        backlog=1024,
    )


if __name__ == "__main__":
    main()
