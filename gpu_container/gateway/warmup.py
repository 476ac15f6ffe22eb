"""Warm-up: one request per adapter (and the base model) carrying the system prompt.

vLLM keeps a prefix cache per adapter, so each adapter gets the byte-stable prefix once; the first
real user then starts from a warm cache and loaded LoRA weights. ``/ping`` stays 503 until this passed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from gateway.tokens import Message


async def warm_up(
    client: httpx.AsyncClient, base_url: str, prefix: list[Message], adapters: list[str], attempts: int = 3
) -> None:
    """Send one short completion per adapter, all with the system prompt.

    Raises
    ------
    httpx.HTTPError
        When an adapter still fails after ``attempts`` tries (the caller leaves ``/ping`` at 503).

    Examples
    --------
    >>> import json
    >>> asked = []
    >>> def engine(request):  # in-memory stand-in for vLLM's OpenAI server
    ...     asked.append(json.loads(request.content)["model"])
    ...     return httpx.Response(200, json={"choices": []})
    >>> async def start() -> None:
    ...     async with httpx.AsyncClient(transport=httpx.MockTransport(engine)) as client:
    ...         prefix = [{"role": "system", "content": "You are the manga store's assistant."}]
    ...         await warm_up(client, "http://127.0.0.1:8081", prefix, ["jp_style", "manga_domain"])
    >>> asyncio.run(start())
    >>> sorted(asked)
    ['base', 'jp_style', 'manga_domain']
    """

    async def one(model: str) -> None:
        payload = {
            "model": model,
            "messages": [*prefix, {"role": "user", "content": "warm-up"}],
            "max_tokens": 1,
            "temperature": 0,
        }
        for attempt in range(attempts):
            try:
                response = await client.post(f"{base_url}/v1/chat/completions", json=payload, timeout=120)
                response.raise_for_status()
                return
            except httpx.HTTPError:
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(1.0 * (attempt + 1))

    await asyncio.gather(*(one(model) for model in dict.fromkeys(["base", *adapters])))
