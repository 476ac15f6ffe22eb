"""Container tests: one real vLLM engine on the CPU for the whole session, and gateways as real subprocesses.

Engine starts in the whole session: this shared engine, plus the one a supervising gateway owns (and
restarts once after the engine-death test). Everything else attaches gateways to the shared engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.local_serving import EngineHandle, GatewayHandle, start_engine, start_gateway
from devtools.tiny_model import TinyModel, ensure_tiny_model

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_model() -> TinyModel:
    return ensure_tiny_model(REPO / ".cache" / "tiny-model")


@pytest.fixture(scope="session")
def vllm_engine(tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineHandle]:
    """One real vLLM OpenAI server on the CPU with the three LoRA adapters (``.base_url``, ``.model_dir``).

    Pinned to one core, as a GPU host keeps the engine off the gateway's CPUs: unpinned, its busy-polling
    processes took both cores of a 2-core machine and its own /metrics went unanswered under load.
    """
    cpus = sorted(os.sched_getaffinity(0))
    pinned = {cpus[0]} if len(cpus) > 1 else None
    with start_engine(tiny_model, logs=tmp_path_factory.mktemp("engine"), cpus=pinned) as engine:
        yield engine


@pytest.fixture(scope="session")
def gateway(
    tiny_model: TinyModel, vllm_engine: EngineHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayHandle]:
    """``python -m gateway serve`` attached to the shared engine, warmed up (``/ping`` 200)."""
    with start_gateway(tiny_model, tmp_path_factory.mktemp("gateway"), engine_url=vllm_engine.base_url) as handle:
        yield handle
