"""Real vLLM 0.32 ``/metrics`` bodies, captured from the CPU engine serving the tiny model with two LoRA adapters.

Captured with ``python -m devtools.tiny_model DIR`` and ``VLLM_CPU_KVCACHE_SPACE=1 python -m
vllm.entrypoints.openai.api_server --model DIR/model --served-model-name tiny --max-model-len 1024
--enable-prefix-caching --enable-lora --max-lora-rank 16 --lora-modules manga_domain=... jp_style=...``,
then ``curl /metrics`` at three moments:

- ``vllm_0_32_idle.prom``: just after start, nothing served;
- ``vllm_0_32_after_warmup.prom``: after 27 chats sharing one system prompt (prefix-cache hits);
- ``vllm_0_32_under_load.prom``: mid-way through 66 concurrent chats (6 running, 2 waiting), later than the
  previous one, so the pair gives real counter deltas.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def read_sample(name: str) -> str:
    return (DATA / f"vllm_0_32_{name}.prom").read_text()


@pytest.fixture
def idle_text() -> str:
    return read_sample("idle")


@pytest.fixture
def warm_text() -> str:
    return read_sample("after_warmup")


@pytest.fixture
def load_text() -> str:
    return read_sample("under_load")
