"""A gateway that supervises its own real engine: warm-up gate, real engine death, restart, giving up, exit.

The tests run in file order on one gateway (module scope): its engine starts once, is killed for real
(SIGKILL to the engine's process group) and restarted in place, then made unable to start. The first death
follows a CUDA OOM trace in the engine's log (a stand-in: a CPU engine cannot run out of GPU memory), so the
gateway must tell it from the second, a plain SIGKILL, and from the failed starts.
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
from typing import Any

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

#: STAND-IN for a real CUDA OOM, which needs a GPU (tests/gpu/test_cuda_oom_gpu.py causes one there): the lines
#: vLLM 0.32's engine core and API server write when the engine core dies of one, written into the engine's own
#: output pipe just before its process group is killed.
CUDA_OOM_TRACE = Path(__file__).parents[1] / "unit/gateway/data/engine_deaths/cuda_oom_during_decode.log"


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


def ask(handle: GatewayHandle, request_id: str | None = None, **extra: object) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": "is volume 3 out?"}], "max_tokens": 8, **extra}
    headers = {"X-Request-Id": request_id} if request_id else {}
    return httpx.post(f"{handle.url}/invocations", json=body, headers=headers, timeout=60)


def request_line(handle: GatewayHandle, request_id: str) -> dict[str, Any]:
    """The request log's line of one request (one JSON line per answer on the gateway's stdout)."""
    lines = [json.loads(line) for line in handle.process.stdout().splitlines() if '"log_type":"request"' in line]
    found: list[dict[str, Any]] = [line for line in lines if line["request_id"] == request_id]
    (line,) = found
    return line


def death_records(handle: GatewayHandle) -> list[dict[str, Any]]:
    """The EMF records of the engine's deaths (dimension set [EndpointName, VariantName, Cause])."""
    return [record for record in handle.emf_lines() if record.get("log_type") == "engine_death"]


def write_to_engine_log(engine_pid: int, text: bytes) -> None:
    """Write into the engine's own stdout/stderr pipe, as its processes would (Linux: /proc/<pid>/fd/2)."""
    fd = os.open(f"/proc/{engine_pid}/fd/2", os.O_WRONLY)
    try:
        os.write(fd, text)
    finally:
        os.close(fd)


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


def die_of_a_cuda_oom(handle: GatewayHandle, engine_pid: int) -> None:
    """The stand-in's trace (see ``CUDA_OOM_TRACE``) in the engine's log, then its whole process group killed."""
    write_to_engine_log(engine_pid, CUDA_OOM_TRACE.read_bytes())
    deadline = time.monotonic() + 10
    while "torch.OutOfMemoryError" not in handle.process.stderr():  # passed through the gateway to its stderr
        assert time.monotonic() < deadline, handle.process.stderr()[-3000:]
        time.sleep(0.1)
    os.killpg(engine_pid, signal.SIGKILL)  # the real thing: the engine and its workers die at once


@pytest.mark.slow(reason="kills the engine and waits for the gateway to start a new one in place (30-60 s)")
def test_a_cuda_oom_engine_death_gets_controlled_answers_its_cause_and_an_in_place_restart(
    owned: GatewayHandle,
) -> None:
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
        headers = {"X-Request-Id": "in-flight-at-oom"}
        with httpx.stream("POST", f"{owned.url}/invocations", json=body, headers=headers, timeout=120) as response:
            for chunk in response.iter_text():
                stream_text.append(chunk)
                first_chunk.set()

    worker = threading.Thread(target=in_flight_stream)
    worker.start()
    assert first_chunk.wait(60)
    die_of_a_cuda_oom(owned, engine_pid)
    worker.join(120)
    events = sse_data("".join(stream_text))
    assert events[-1] == "[DONE]"
    last = json.loads(events[-2])
    assert last["choices"][0]["finish_reason"] == "fallback"
    assert last["backend"]["fallback_reason"] == "engine_unavailable"

    during = ask(owned, request_id="during-restart-after-oom")
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
    assert_told_a_cuda_oom(owned, engine_pid)


def assert_told_a_cuda_oom(handle: GatewayHandle, engine_pid: int) -> None:
    """The death is told apart from other deaths: counted in OomCaught (no engine call was answered out of memory)
    with its cause, in the gateway's log, its EMF record and the request log lines of the requests it failed."""
    assert (handle.metric_total("OomCaught"), handle.metric_total("EngineDeaths")) == (1, 1)
    (death,) = death_records(handle)
    assert death["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["EndpointName", "VariantName", "Cause"]]
    assert (death["Cause"], death["OomCaught"], death["EngineDeaths"]) == ("cuda_oom", 1.0, 1.0)
    assert (death["cause"], death["phase"], death["exit_status"]) == ("cuda_oom", "serving", "signal 9 (SIGKILL)")
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB" in str(death["evidence"])
    assert f"engine died (pid {engine_pid}): cause cuda_oom (signal 9 (SIGKILL))" in handle.process.stderr()
    for request_id in ("in-flight-at-oom", "during-restart-after-oom"):
        line = request_line(handle, request_id)
        assert (line["outcome"], line["engine_death_cause"]) == ("fallback", "cuda_oom"), line


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
    assert ask(owned, request_id="after-giving-up").headers["x-gateway-fallback"] == "engine_unavailable"
    assert config_file.exists()
    # A SIGKILL with no error in the log is "killed", a start that exits on a bad model "other": neither is an OOM.
    assert f"engine died (pid {engine_pid}): cause killed (signal 9 (SIGKILL)); restarting" in owned.process.stderr()
    assert request_line(owned, "after-giving-up")["engine_death_cause"] == "other"
    time.sleep(2.5)  # one metrics interval
    causes = [(record["cause"], record["phase"]) for record in death_records(owned)]
    failed_starts = [("other", "start")] * (int(SUPERVISOR["max_failed_restarts"]) + 1)
    assert causes == [("cuda_oom", "serving"), ("killed", "serving"), *failed_starts]
    assert owned.metric_total("OomCaught") == 1


def test_sigterm_exits_zero_and_leaves_no_engine(owned: GatewayHandle) -> None:
    assert owned.engine_port is not None
    assert owned.process.stop(timeout_s=40) == 0
    assert engine_pids(owned.engine_port) == []
