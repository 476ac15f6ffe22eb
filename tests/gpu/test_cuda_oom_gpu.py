"""A real CUDA out-of-memory error, told apart by the supervisor (runs only on a GPU machine).

The container tests stand in for it with the lines vLLM writes (a CPU engine cannot run out of GPU memory); here
PyTorch really runs out of GPU memory, so the message the classifier matches is the installed PyTorch's own.
The engine the supervisor runs is a real process that fills the GPU with plain ``cudaMalloc`` allocations (PyTorch's
caching allocator) until one fails and the uncaught error ends it, as an engine core dies of one; its
``/health`` is answered in memory. Everything of the gateway is real: supervisor, pipe, log tail, classifier,
recorder.
"""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import time
import traceback

import httpx
import pytest

from fleetops.metrics import MetricName
from gateway.config import SupervisorConfig
from gateway.engine_death import DeathCause, classify_exit
from gateway.engine_log import EngineLog
from gateway.metrics import GatewayMetrics
from gateway.supervisor import EngineState, EngineSupervisor

pytestmark = pytest.mark.gpu

#: Serves a moment, then takes GPU memory a GiB at a time until the allocator fails; the error ends the process.
FILL_THE_GPU = """
import sys, time, torch
print("engine up on", torch.cuda.get_device_name(0), flush=True)
time.sleep(0.5)
held = []
while True:
    held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
"""


def cuda_torch() -> None:
    """Fail with what is missing when PyTorch here cannot use the GPU the folder's conftest found."""
    probe = "import torch; print(torch.__version__, torch.cuda.is_available())"
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert answer.stdout.strip().endswith("True"), f"PyTorch cannot use the GPU: {answer.stdout} {answer.stderr}"


def test_pytorchs_own_out_of_memory_error_is_classified_cuda_oom() -> None:
    cuda_torch()
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError) as caught:
        torch.empty(2 * total, dtype=torch.uint8, device="cuda")  # twice the GPU: refused at once, nothing taken
    lines = "".join(traceback.format_exception(caught.value)).splitlines()

    death = classify_exit(1, lines)

    assert death.cause is DeathCause.CUDA_OOM, lines
    assert death.evidence is not None and "CUDA out of memory" in death.evidence, death


def test_an_engine_that_runs_out_of_gpu_memory_is_counted_in_oom_caught() -> None:
    cuda_torch()
    out = io.BytesIO()
    engine = EngineSupervisor(
        [sys.executable, "-c", FILL_THE_GPU],
        "http://engine.invalid",
        SupervisorConfig(health_interval_s=0.1, startup_timeout_s=120, restart_backoff_initial_s=60),
        client=httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(200))),
        metrics=GatewayMetrics(),
        log=EngineLog(out=out),
    )

    async def scenario() -> None:
        await engine.start()
        deadline = time.monotonic() + 180
        while engine.last_death is None:
            assert time.monotonic() < deadline, out.getvalue()[-3000:]
            await asyncio.sleep(0.1)
        assert engine.state is EngineState.RESTARTING
        await engine.stop()

    asyncio.run(scenario())

    snapshot = engine.metrics.drain()
    (event,) = snapshot.events
    print(event.properties)  # the real message, in the test log
    assert (event.properties["cause"], event.properties["phase"]) == ("cuda_oom", "serving"), out.getvalue()[-3000:]
    assert "OutOfMemoryError" in str(event.properties["evidence"])
    assert (snapshot.counters[MetricName.OOM_CAUGHT], snapshot.counters[MetricName.ENGINE_DEATHS]) == (1, 1)
    assert event.dimensions == {"Cause": "cuda_oom"}
