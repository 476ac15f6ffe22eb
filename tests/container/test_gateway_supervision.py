"""A gateway that supervises its own real engine: warm-up gate, real engine death, restart, giving up, exit.

The tests run in file order on one gateway (module scope): its engine starts once, is killed for real
(SIGKILL to the engine's process group) and restarted in place, then made unable to start.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.local_serving import (
    LONG_ANSWER_BUDGET,
    GatewayHandle,
    default_max_model_len,
    engine_pids,
    engine_totals,
    sse_data,
    start_gateway,
)
from devtools.tiny_model import TinyModel
from gateway.upstream import KEEPALIVE_S

pytestmark = pytest.mark.container

SUPERVISOR = {
    "health_interval_s": 0.5,
    "health_failures_to_restart": 2,
    "startup_timeout_s": 240,
    "restart_backoff_initial_s": 0.5,
    "restart_backoff_max_s": 2.0,
    "max_failed_restarts": 1,
}

#: An engine knob from the model's environment (the contract's SM_VLLM_*), over gateway.yaml's engine section.
MODEL_KNOBS = {"SM_VLLM_MAX_NUM_SEQS": "8"}


@pytest.fixture(scope="module")
def model_copy(tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A private copy: the last test breaks it so that restarts fail for real.
    target = tmp_path_factory.mktemp("owned") / "model"
    shutil.copytree(tiny_model.model_dir, target)
    return target


@pytest.fixture(scope="module")
def owned(tiny_model: TinyModel, model_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    with start_gateway(
        tiny_model,
        tmp_path_factory.mktemp("owned-gateway"),
        overrides={"supervisor": SUPERVISOR, "budget": LONG_ANSWER_BUDGET, "limits": {"min_tokens": 1600}},
        env=MODEL_KNOBS,
        model_dir=model_copy,
        wait_ready_s=None,
        name="owned",
    ) as handle:
        yield handle


def ask(handle: GatewayHandle, **extra: object) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": "is volume 3 out?"}], "max_tokens": 8, **extra}
    return httpx.post(f"{handle.url}/invocations", json=body, timeout=60)


@pytest.mark.slow(reason="watches the gateway's own CPU vLLM engine start and warm every adapter (30-60 s)")
def test_ping_is_503_until_the_engine_is_loaded_and_every_adapter_warmed(owned: GatewayHandle) -> None:
    first = httpx.get(f"{owned.url}/ping", timeout=2)
    assert first.status_code == 503
    assert first.json() == {"status": "warming_up"}
    assert ask(owned).headers.get("x-gateway-fallback") == "engine_unavailable"  # no engine yet: controlled
    deadline = time.monotonic() + 300
    while owned.ping() != 200:
        assert time.monotonic() < deadline, owned.process.stderr()[-3000:]
        assert owned.process.alive(), owned.process.stderr()[-3000:]
        time.sleep(0.5)
    assert owned.engine_port is not None
    # Warm-up: base + the three adapters, each with the system prompt (so it is in the prefix cache).
    engine = engine_totals(f"http://127.0.0.1:{owned.engine_port}")
    assert engine["vllm:request_success_total"] >= 4
    assert engine["vllm:prefix_cache_queries_total"] > 0
    assert "warm-up done" in owned.process.stderr()
    assert ask(owned).status_code == 200


def test_the_models_engine_knobs_reach_the_engine(owned: GatewayHandle) -> None:
    assert owned.engine_port is not None
    (engine_pid,) = engine_pids(owned.engine_port)

    args = Path(f"/proc/{engine_pid}/cmdline").read_bytes().decode().split("\0")

    assert args[args.index("--max-num-seqs") + 1] == "8"  # SM_VLLM_MAX_NUM_SEQS
    assert args[args.index("--max-model-len") + 1] == str(default_max_model_len())  # gateway.yaml's engine section


def test_the_engine_keeps_idle_connections_longer_than_the_gateway_reuses_them(owned: GatewayHandle) -> None:
    """Otherwise, under load, the gateway sends on a connection the engine is closing and trips its breaker."""
    assert owned.engine_port is not None
    (engine_pid,) = engine_pids(owned.engine_port)

    environ = dict(v.split("=", 1) for v in Path(f"/proc/{engine_pid}/environ").read_bytes().decode().split("\0") if v)

    assert int(environ["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"]) > KEEPALIVE_S


@pytest.mark.slow(reason="kills the engine and waits for the gateway to start a new one in place (30-60 s)")
def test_engine_death_gets_controlled_answers_and_an_in_place_restart(owned: GatewayHandle) -> None:
    assert owned.engine_port is not None
    (engine_pid,) = engine_pids(owned.engine_port)
    stream_text: list[str] = []
    first_chunk = threading.Event()

    def in_flight_stream() -> None:
        body = {
            "messages": [{"role": "user", "content": "tell me a long story"}],
            "max_tokens": 1600,
            "stream": True,
            "min_tokens": 1600,
        }
        with httpx.stream("POST", f"{owned.url}/invocations", json=body, timeout=120) as response:
            for chunk in response.iter_text():
                stream_text.append(chunk)
                first_chunk.set()

    worker = threading.Thread(target=in_flight_stream)
    worker.start()
    assert first_chunk.wait(60)
    os.killpg(engine_pid, signal.SIGKILL)  # the real thing: the engine and its workers die at once
    worker.join(120)
    events = sse_data("".join(stream_text))
    assert events[-1] == "[DONE]"
    last = json.loads(events[-2])
    assert last["choices"][0]["finish_reason"] == "fallback"
    assert last["backend"]["fallback_reason"] == "engine_unavailable"

    during = ask(owned)
    assert during.status_code == 200
    assert during.headers["x-gateway-fallback"] in ("engine_unavailable", "engine_error")
    assert during.json()["choices"][0]["message"]["content"].startswith("Sorry, the assistant is busy")

    pings = []
    deadline = time.monotonic() + 300
    while True:  # /ping stays 200 through a bounded restart
        pings.append(owned.ping())
        answer = ask(owned)
        if "x-gateway-fallback" not in answer.headers:
            break
        assert time.monotonic() < deadline, owned.process.stderr()[-3000:]
        time.sleep(1)
    assert set(pings) == {200}, pings
    assert answer.status_code == 200 and answer.json()["backend"]["version"] == "tiny-llama-test"
    assert engine_pids(owned.engine_port) != [engine_pid]

    time.sleep(2.5)  # one metrics interval
    assert owned.metric_total("BreakerTrips") >= 1
    assert owned.metric_total("EngineRestarts") >= 1
    assert owned.metric_total("Fallbacks") >= 2


def test_unhealthy_after_n_failed_restarts(owned: GatewayHandle, model_copy: Path) -> None:
    assert owned.engine_port is not None
    (config_file := model_copy / "config.json").write_text("{ this is not a model config")
    (engine_pid,) = engine_pids(owned.engine_port)
    os.killpg(engine_pid, signal.SIGKILL)
    assert owned.ping() == 200  # a restart is under way: still healthy
    deadline = time.monotonic() + 240
    while owned.ping() != 503:
        assert time.monotonic() < deadline, owned.process.stderr()[-3000:]
        time.sleep(0.5)
    assert httpx.get(f"{owned.url}/ping", timeout=2).json() == {"status": "engine_failed"}
    assert owned.process.stderr().count("engine start failed") == SUPERVISOR["max_failed_restarts"] + 1
    assert ask(owned).headers["x-gateway-fallback"] == "engine_unavailable"
    assert config_file.exists()


def test_sigterm_exits_zero_and_leaves_no_engine(owned: GatewayHandle) -> None:
    assert owned.engine_port is not None
    assert owned.process.stop(timeout_s=40) == 0
    assert engine_pids(owned.engine_port) == []
