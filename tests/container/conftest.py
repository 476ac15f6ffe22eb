"""Container tests: one real vLLM engine on the CPU for the whole session, and gateways as real subprocesses.

Engine starts in the whole session: this shared engine, plus the one a supervising gateway owns (and
restarts once after the engine-death test). Everything else attaches gateways to the shared engine.

The eval adapters (devtools/eval_adapters.py) take minutes of one core to train on a cold cache: a session that
uses them trains them in the background from its first container test on, on the core the shared engine leaves
free, and runs the tests that need them last, so the training overlaps the tests that mostly wait. Under
`make test` they are usually trained already, or training: the Makefile starts them beside this run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.eval_adapters import training_in_background
from devtools.local_serving import EngineHandle, GatewayHandle, start_engine, start_gateway
from devtools.tiny_model import TinyModel, ensure_tiny_model

REPO = Path(__file__).resolve().parents[2]
#: Files whose tests use the trained eval adapters (the promotion gates on the local system too).
EVAL_ADAPTER_FILES = {"test_eval_adapters.py", "test_promotion_gates.py"}


def _engine_cpus() -> set[int] | None:
    """The one core the shared engine is pinned to (``None`` on a one-core machine)."""
    cpus = sorted(os.sched_getaffinity(0))
    return {cpus[0]} if len(cpus) > 1 else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files that use the eval adapters run at the session's end, test_eval_adapters.py last (stable order
    otherwise): by then the background training is done, or they wait on its build lock."""
    items[:] = sorted(
        items,
        key=lambda item: (
            (name := Path(str(item.path)).name) in EVAL_ADAPTER_FILES,
            name == "test_eval_adapters.py",
        ),
    )


@pytest.fixture(scope="session")
def tiny_model() -> TinyModel:
    return ensure_tiny_model(REPO / ".cache" / "tiny-model")


@pytest.fixture(scope="session", autouse=True)
def _eval_adapters_in_background(
    request: pytest.FixtureRequest, tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Train the eval adapters in the background when this session has tests that use them (and they are not
    current): niced, on the core the shared engine does not use."""
    if not any(Path(str(item.path)).name in EVAL_ADAPTER_FILES for item in request.session.items):
        yield
        return
    engine = _engine_cpus()
    free = set(os.sched_getaffinity(0)) - engine if engine else None
    log = tmp_path_factory.mktemp("eval-adapters") / "training.log"
    with training_in_background(tiny_model, log, cpus=free):
        yield


@pytest.fixture(scope="session")
def vllm_engine(tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineHandle]:
    """One real vLLM OpenAI server on the CPU with the three LoRA adapters (``.base_url``, ``.model_dir``).

    Pinned to one core, as a GPU host keeps the engine off the gateway's CPUs: unpinned, its busy-polling
    processes took both cores of a 2-core machine and its own /metrics went unanswered under load.
    """
    with start_engine(tiny_model, logs=tmp_path_factory.mktemp("engine"), cpus=_engine_cpus()) as engine:
        yield engine


@pytest.fixture(scope="session")
def gateway(
    tiny_model: TinyModel, vllm_engine: EngineHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayHandle]:
    """``python -m gateway serve`` attached to the shared engine, warmed up (``/ping`` 200)."""
    with start_gateway(tiny_model, tmp_path_factory.mktemp("gateway"), engine_url=vllm_engine.base_url) as handle:
        yield handle
