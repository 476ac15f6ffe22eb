"""The supervisor classifies each end of its engine, counts it and records it; requests that fall back say why.

The engine here is a real process, but a stand-in for vLLM (a TEST DOUBLE: a CPU machine cannot run out of GPU
memory, lose a GPU or break NCCL): a short Python script that writes one of the realistic log excerpts of
``data/engine_deaths`` to its stderr and then exits, hangs or is killed, as vLLM does in each case. Its
``/health`` is answered in memory (``httpx.MockTransport``). Everything else is the gateway's own: the
supervisor, its pipe and log tail, the classifier, the recorder, the invocation service and the request log.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
import uvloop
from starlette.datastructures import Headers

from fleetops.metrics import MetricName
from gateway.config import GatewayConfig, SupervisorConfig
from gateway.engine_death import DeathCause
from gateway.engine_log import EngineLog
from gateway.metrics import GatewayMetrics
from gateway.prompt import PromptBuilder
from gateway.request_log import RequestLog
from gateway.routing import Router
from gateway.serving import InvocationService
from gateway.supervisor import EngineState, EngineSupervisor
from gateway.upstream import Upstream

DATA = Path(__file__).parent / "data" / "engine_deaths"

#: The stand-in engine: serve a while, write the excerpt to stderr (as vLLM's processes do), then end as told.
ENGINE = """
import os, sys, time
log, serve_s, then = sys.argv[1], float(sys.argv[2]), sys.argv[3]
print("(APIServer pid=1) INFO [api_server.py:1971] Starting vLLM API server 0 on http://127.0.0.1:8081", flush=True)
time.sleep(serve_s)
sys.stderr.write(open(log).read())
sys.stderr.flush()
if then == "hang":
    time.sleep(120)
sys.exit(int(then))
"""

FAST = SupervisorConfig(
    health_interval_s=0.05,
    health_failures_to_restart=2,
    startup_timeout_s=30,
    restart_backoff_initial_s=60,  # stays in its backoff after the first end, so the test reads that end alone
    max_failed_restarts=3,
)


class Health:
    """The stand-in's ``/health``, answered in memory: 200 while ``up``."""

    def __init__(self, up: bool) -> None:
        self.up = up

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200 if self.up else 503)


def supervisor(fixture: str, serve_s: float, then: str, health: Health, out: io.BytesIO) -> EngineSupervisor:
    command = [sys.executable, "-c", ENGINE, str(DATA / fixture), str(serve_s), then]
    return EngineSupervisor(
        command,
        "http://engine.invalid",
        FAST,
        client=httpx.AsyncClient(transport=httpx.MockTransport(health)),
        metrics=GatewayMetrics(),
        log=EngineLog(out=out),
    )


async def until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def run(scenario: Callable[[], Awaitable[None]], loop: str = "asyncio") -> None:
    """Run on asyncio's loop, or on uvloop's (the gateway's, under uvicorn)."""
    new_loop = uvloop.new_event_loop() if loop == "uvloop" else asyncio.new_event_loop()
    try:
        new_loop.run_until_complete(asyncio.wait_for(scenario(), timeout=60))
    finally:
        new_loop.close()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_cuda_oom_death_while_serving_counts_in_oom_caught_with_its_cause(loop: str) -> None:
    out = io.BytesIO()
    engine = supervisor("cuda_oom_during_decode.log", 0.3, "1", Health(up=True), out)
    seen: dict[str, object] = {}

    async def scenario() -> None:
        await engine.start()
        await until(lambda: engine.state is EngineState.READY and engine.process is not None)
        assert engine.process is not None
        seen["stderr"] = os.readlink(f"/proc/{engine.process.pid}/fd/2").split(":")[0]  # an OS pipe on either loop
        # The trace is read before the process ends: a request failing now already knows why.
        await until(lambda: engine.failure_cause() is not None)
        seen["dying"] = engine.failure_cause()
        await until(lambda: engine.last_death is not None)
        seen["state"], seen["down"] = engine.state, engine.failure_cause()
        await engine.stop()

    run(scenario, loop)

    assert seen == {
        "stderr": "pipe",
        "dying": DeathCause.CUDA_OOM,
        "state": EngineState.RESTARTING,
        "down": DeathCause.CUDA_OOM,
    }
    snapshot = engine.metrics.drain()
    assert snapshot.counters[MetricName.OOM_CAUGHT] == 1
    assert snapshot.counters[MetricName.ENGINE_DEATHS] == 1
    (event,) = snapshot.events
    assert event.dimensions == {"Cause": "cuda_oom"}
    assert event.counters == {MetricName.ENGINE_DEATHS: 1.0, MetricName.OOM_CAUGHT: 1.0}
    assert event.properties["log_type"] == "engine_death"
    assert (event.properties["cause"], event.properties["phase"], event.properties["exit_status"]) == (
        "cuda_oom",
        "serving",
        "exit 1",
    )
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB" in str(event.properties["evidence"])
    # The engine's log still reaches the gateway's stderr whole.
    assert (DATA / "cuda_oom_during_decode.log").read_bytes() in out.getvalue()


def test_a_cuda_oom_at_start_is_a_failed_start_with_its_cause() -> None:
    engine = supervisor("cuda_oom_at_start.log", 0.0, "1", Health(up=False), io.BytesIO())

    async def scenario() -> None:
        await engine.start()
        await until(lambda: engine.last_death is not None)
        await engine.stop()

    run(scenario)

    assert engine.failed_starts == 1
    (event,) = engine.metrics.drain().events
    assert (event.properties["cause"], event.properties["phase"]) == ("cuda_oom", "start")
    assert MetricName.OOM_CAUGHT in event.counters


def test_an_engine_that_hangs_after_an_nccl_error_is_stopped_and_classified_nccl() -> None:
    health = Health(up=True)
    engine = supervisor("nccl_watchdog_timeout.log", 0.2, "hang", health, io.BytesIO())
    pids: list[int] = []

    async def scenario() -> None:
        await engine.start()
        await until(lambda: engine.state is EngineState.READY and engine.process is not None)
        assert engine.process is not None
        pids.append(engine.process.pid)
        await until(lambda: engine.failure_cause() is DeathCause.NCCL)
        health.up = False  # the API server stops answering /health; its process stays
        await until(lambda: engine.last_death is not None)
        await engine.stop()

    run(scenario)

    snapshot = engine.metrics.drain()
    (event,) = snapshot.events
    assert (event.properties["cause"], event.properties["exit_status"]) == ("nccl", "still running")
    assert snapshot.counters[MetricName.OOM_CAUGHT] == 0
    with pytest.raises(ProcessLookupError):  # the gateway stopped it
        os.killpg(pids[0], 0)


def test_a_sigkill_with_no_error_in_the_log_is_killed_and_not_an_oom() -> None:
    engine = supervisor("serving_no_error.log", 0.0, "hang", Health(up=True), io.BytesIO())

    async def scenario() -> None:
        await engine.start()
        await until(lambda: engine.state is EngineState.READY and len(engine.log.lines()) > 5)
        assert engine.process is not None
        os.killpg(engine.process.pid, signal.SIGKILL)
        await until(lambda: engine.last_death is not None)
        await engine.stop()

    run(scenario)

    snapshot = engine.metrics.drain()
    (event,) = snapshot.events
    assert (event.dimensions, event.properties["exit_status"]) == ({"Cause": "killed"}, "signal 9 (SIGKILL)")
    assert event.properties["evidence"] is None
    assert event.counters == {MetricName.ENGINE_DEATHS: 1.0}
    assert (snapshot.counters[MetricName.ENGINE_DEATHS], snapshot.counters[MetricName.OOM_CAUGHT]) == (1, 0)


def test_a_request_that_falls_back_while_the_engine_restarts_logs_the_death_cause(
    builder: PromptBuilder, config: GatewayConfig
) -> None:
    engine = supervisor("xid_fallen_off_the_bus.log", 0.0, "1", Health(up=True), io.BytesIO())
    lines = io.StringIO()
    request_log = RequestLog("v7", config.system_prompt.version, engine.metrics, out=lines)
    service = InvocationService(
        builder,
        Router(config.routing),
        engine,
        upstream=Upstream(),
        metrics=engine.metrics,
        containment=config.containment,
        backend_version="v7",
    )
    body = json.dumps({"messages": [{"role": "user", "content": "is volume 3 out?"}], "max_tokens": 8}).encode()

    async def scenario() -> None:
        await engine.start()
        await until(lambda: engine.last_death is not None)
        started = time.perf_counter()
        trace = request_log.begin(Headers({"x-request-id": "req-during-restart"}), started)
        request_log.finish(trace, await service.invoke(body, started, trace))
        await engine.stop()

    run(scenario)

    (record,) = (json.loads(line) for line in lines.getvalue().splitlines())
    assert (record["request_id"], record["outcome"], record["fallback_reason"]) == (
        "req-during-restart",
        "fallback",
        "engine_unavailable",
    )
    assert record["engine_death_cause"] == "xid"
