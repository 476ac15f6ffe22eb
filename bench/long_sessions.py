"""40-turn sessions against a supervised engine with a deliberately small KV cache.

The gateway starts its own real vLLM engine on the CPU (as in the container) with
``--kv-cache-memory-bytes`` set to a few max-length requests' worth, so concurrent long sessions
press on the KV cache (``preemptions`` shows it). Every session sends its whole history each turn.

- ``engine_deaths``: engine restarts + breaker trips the gateway reported (EMF), plus an engine process
  that is not the one we started with. Must be 0.
- ``over_budget_requests``: answers where ``prompt_tokens + max_tokens > max_model_len``, or any answer
  that was not a 200 from the engine (a fallback, a 4xx/5xx). Must be 0.
- ``unbudgeted_rejected_requests``: the same sessions sent straight to vLLM with their full history:
  how many the engine refused for length (what the budget prevents).
"""

from __future__ import annotations

import asyncio
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from devtools.local_serving import CPU_ENGINE_ARGS, default_max_model_len, engine_pids, engine_totals, start_gateway
from devtools.tiny_model import ADAPTERS, ensure_tiny_model

REPO = Path(__file__).resolve().parents[1]
SESSIONS = 6
TURNS = 40
MAX_TOKENS = 96
MAX_MODEL_LEN = default_max_model_len()
KV_CACHE_BYTES = 6 * 1024 * 1024  # ~6k tokens of the tiny model: three max-length requests for six sessions
TEXT = "which manga volume ships next week is the preorder open 最新刊 予約 発売日 漫画 shipping to Tokyo refund"


def question(rng: random.Random) -> str:
    words = TEXT.split()
    return " ".join(rng.choice(words) for _ in range(rng.randint(30, 60)))


async def sessions(url: str, direct: bool, system_prompt: str) -> tuple[int, int]:
    """Returns (over-budget or failed answers, answers the engine refused)."""
    over, refused = 0, 0

    async def one(index: int, client: httpx.AsyncClient) -> None:
        nonlocal over, refused
        rng = random.Random(index)
        adapter = ADAPTERS[index % len(ADAPTERS)]
        history: list[dict[str, str]] = []
        for _ in range(TURNS):
            asked = question(rng)
            sampling = {"max_tokens": MAX_TOKENS, "min_tokens": MAX_TOKENS, "temperature": 0}  # no ignore_eos: refused
            if direct:
                messages = [{"role": "system", "content": system_prompt}, *history, {"role": "user", "content": asked}]
                body: dict[str, Any] = {"model": adapter, "messages": messages, **sampling}
            else:
                body = {"messages": [{"role": "user", "content": asked}], "history": history, "adapter": adapter}
                body.update(sampling)
            response = await client.post(url, json=body)
            if response.status_code != 200 or "x-gateway-fallback" in response.headers:
                refused += int(response.status_code == 400)
                over += 1
                answer = "(no answer)"
            else:
                data = response.json()
                over += int(data["usage"]["prompt_tokens"] + MAX_TOKENS > MAX_MODEL_LEN)
                answer = data["choices"][0]["message"]["content"]
            history += [{"role": "user", "content": asked}, {"role": "assistant", "content": answer}]

    async with httpx.AsyncClient(timeout=120) as client:
        await asyncio.gather(*(one(i, client) for i in range(SESSIONS)))
    return over, refused


def run() -> dict[str, float]:
    from gateway.config import load_gateway_config

    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    system_prompt = load_gateway_config(REPO / "gpu_container" / "config" / "gateway.yaml").system_prompt.text
    extra = [*CPU_ENGINE_ARGS, "--kv-cache-memory-bytes", str(KV_CACHE_BYTES)]
    with (
        tempfile.TemporaryDirectory() as work,
        start_gateway(
            tiny,
            Path(work),
            overrides={"supervisor": {"extra_args": extra}},
            engine_kv_cache_gib=None,
            env={"METRICS_INTERVAL_S": "2"},
        ) as gw,
    ):
        assert gw.engine_port is not None
        pids = engine_pids(gw.engine_port)
        started = time.perf_counter()
        over, _ = asyncio.run(sessions(f"{gw.url}/invocations", direct=False, system_prompt=system_prompt))
        elapsed = time.perf_counter() - started
        preemptions = engine_totals(f"http://127.0.0.1:{gw.engine_port}")["vllm:num_preemptions_total"]
        engine_url = f"http://127.0.0.1:{gw.engine_port}/v1/chat/completions"
        _, refused = asyncio.run(sessions(engine_url, direct=True, system_prompt=system_prompt))
        time.sleep(2.5)  # one metrics interval
        deaths = gw.metric_total("EngineRestarts") + gw.metric_total("BreakerTrips")
        deaths += int(engine_pids(gw.engine_port) != pids)
        sizes = re.findall(r"KV cache size: ([\d,]+) tokens", gw.process.stderr())
    return {
        "engine_deaths": float(deaths),
        "over_budget_requests": float(over),
        "requests": float(SESSIONS * TURNS),
        "preemptions": preemptions,
        "kv_cache_tokens": float(sizes[-1].replace(",", "")) if sizes else -1.0,
        "budgeted_seconds": round(elapsed, 1),
        "unbudgeted_rejected_requests": float(refused),
    }
