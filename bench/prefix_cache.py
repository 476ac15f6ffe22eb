"""Prefix-cache hit rate of 20-turn conversations, from vLLM's own counters, on the real CPU engine.

- ``prefix_cache_hit_rate``: conversations through the gateway (``/invocations``: its byte-stable prefix
  and chunked sliding window) with ``summary.mode: off``: the marker alone stands for the dropped turns.
  Each turn sends the full history so far; the answers the model gave become the next turn's history;
  the budget trims them (``budget_trimmed_turns`` > 0).
- ``summarized_prefix_cache_hit_rate``: the same kind of conversations through the gateway as shipped, whose
  model summarizes the dropped turns into the marker's slot once per slide (the summary calls' own prefill
  counted too); ``summary_calls_per_100_turns``: those calls (the gateway's ``HistorySummaries``) per 100
  turns sent.
- ``naive_prefix_cache_hit_rate``: the same kind of conversations (other text, so nothing is shared
  with the first run but the system prompt), sent direct to vLLM by a builder that puts the current
  time in the system prompt and otherwise applies the same budget.
- ``slide_by_one_prefix_cache_hit_rate``: byte-stable system prompt, but a window that drops one turn
  every time history is over budget (the tension the chunked slide resolves).

Hit rate = delta ``vllm:prefix_cache_hits_total`` / delta ``vllm:prefix_cache_queries_total`` (tokens)
over each run. Conversations run ``PARALLEL`` at a time, turns in order within each.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from devtools.local_serving import engine_totals, start_engine, start_gateway
from devtools.tiny_model import ensure_tiny_model
from fleetops.metrics import MetricName

REPO = Path(__file__).resolve().parents[1]
CONVERSATIONS = 6
PARALLEL = 3
TURNS = 20
ANSWER_TOKENS = 48
ADAPTER = "manga_domain"
TEXT = (
    "which manga volume ships next week is the preorder open for the box set and when does chapter "
    "arrive in the store 最新刊 予約 発売日 漫画 please tell me about shipping to Tokyo"
)

Send = Callable[[httpx.AsyncClient, list[dict[str, str]], str], Awaitable[tuple[str, int]]]


def question(rng: random.Random) -> str:
    return " ".join(rng.choice(TEXT.split()) for _ in range(rng.randint(25, 45)))


def engine_counters(base_url: str) -> tuple[float, float]:
    totals = engine_totals(base_url)
    return totals["vllm:prefix_cache_hits_total"], totals["vllm:prefix_cache_queries_total"]


async def conversations(send: Send, seed: int) -> int:
    """Run the conversations; returns how many turns the budget dropped in the last turns."""
    dropped = 0
    semaphore = asyncio.Semaphore(PARALLEL)

    async def one(index: int, client: httpx.AsyncClient) -> None:
        nonlocal dropped
        rng = random.Random(seed * 1000 + index)
        history: list[dict[str, str]] = []
        async with semaphore:
            for _ in range(TURNS):
                asked = question(rng)
                answer, cut = await send(client, history, asked)
                history += [{"role": "user", "content": asked}, {"role": "assistant", "content": answer}]
            dropped += cut

    async with httpx.AsyncClient(timeout=120) as client:
        await asyncio.gather(*(one(i, client) for i in range(CONVERSATIONS)))
    return dropped


def measure(base_url: str, send: Send, seed: int) -> tuple[float, int]:
    hits0, queries0 = engine_counters(base_url)
    dropped = asyncio.run(conversations(send, seed))
    time.sleep(1.0)  # counters are updated after the response
    hits1, queries1 = engine_counters(base_url)
    return (hits1 - hits0) / max(queries1 - queries0, 1.0), dropped


def run() -> dict[str, float]:
    from gateway.config import BudgetConfig, SystemPrompt, load_gateway_config
    from gateway.prompt import PromptBuilder
    from gateway.protocol import InvocationRequest
    from gateway.tokens import TokenCounter

    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    config = load_gateway_config(REPO / "gpu_container" / "config" / "gateway.yaml")
    counter = TokenCounter(tiny.model_dir)
    # min_tokens, not ignore_eos (the gateway refuses it): a fixed answer length either way
    sampling = {"max_tokens": ANSWER_TOKENS, "min_tokens": ANSWER_TOKENS, "temperature": 0}

    with tempfile.TemporaryDirectory() as work, start_engine(tiny, logs=Path(work)) as engine:

        def through(url: str) -> Send:
            async def send(client: httpx.AsyncClient, history: list[dict[str, str]], q: str) -> Any:
                body = {"messages": [{"role": "user", "content": q}], "history": history, "adapter": ADAPTER}
                response = await client.post(f"{url}/invocations", json={**body, **sampling})
                response.raise_for_status()
                return response.json()["choices"][0]["message"]["content"], int(response.headers["x-dropped-turns"])

            return send

        quiet = {"METRICS_INTERVAL_S": "60"}  # counters arrive in the final flush, when the gateway stops
        marker_only = {"summary": {"mode": "off"}}
        with start_gateway(tiny, Path(work), engine.base_url, overrides=marker_only, env=quiet, name="marker") as gw:
            gateway_rate, gateway_dropped = measure(engine.base_url, through(gw.url), seed=1)
        with start_gateway(tiny, Path(work), engine.base_url, env=quiet, name="summarized") as summarized:
            summarized_rate, _ = measure(engine.base_url, through(summarized.url), seed=4)
        summary_calls = summarized.metric_total(MetricName.HISTORY_SUMMARIES)

        def direct(builder_for: Callable[[], PromptBuilder]) -> Send:
            async def send(client: httpx.AsyncClient, history: list[dict[str, str]], q: str) -> Any:
                request = InvocationRequest.model_validate({"messages": [{"role": "user", "content": q}],
                                                            "history": history})  # fmt: skip
                built = builder_for().build(request)
                body = {"model": ADAPTER, "messages": built.messages, **sampling}
                response = await client.post(f"{engine.base_url}/v1/chat/completions", json=body)
                if response.status_code != 200:
                    raise RuntimeError(f"engine answered {response.status_code}: {response.text[:500]}")
                return response.json()["choices"][0]["message"]["content"], built.dropped_turns

            return send

        def timestamped() -> PromptBuilder:
            now = datetime.now(UTC).isoformat(timespec="milliseconds")
            prompt = SystemPrompt(version="naive", text=f"{config.system_prompt.text}\nCurrent time: {now}")
            return PromptBuilder(counter, prompt, config.budget)

        budget = config.budget
        by_one = BudgetConfig(**{**budget.model_dump(), "history_low_tokens": budget.history_high_tokens - 1})
        slide_by_one = PromptBuilder(counter, config.system_prompt, by_one)
        naive_rate, _ = measure(engine.base_url, direct(timestamped), seed=2)
        by_one_rate, _ = measure(engine.base_url, direct(lambda: slide_by_one), seed=3)

    return {
        "prefix_cache_hit_rate": round(gateway_rate, 3),
        "naive_prefix_cache_hit_rate": round(naive_rate, 3),
        "slide_by_one_prefix_cache_hit_rate": round(by_one_rate, 3),
        "budget_trimmed_turns": float(gateway_dropped),
        "summarized_prefix_cache_hit_rate": round(summarized_rate, 3),
        "summary_calls_per_100_turns": round(100 * summary_calls / (CONVERSATIONS * TURNS), 2),
    }
