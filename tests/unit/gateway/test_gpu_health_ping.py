"""``/ping`` and the ``GpuHealthy`` metric when the GPU fails, through the real gateway app, monitor and metrics agent.

The GPU is ``FakeNvml`` (a test double: no GPU here, and a GPU fault cannot be caused on demand); the engine is
``ReadyEngineDouble`` (a test double: /ping reads only the engine's state, and no request reaches it). Everything
else is the gateway's own: the Starlette app and its lifespan, the health monitor's periodic loop, the recorder
and the EMF agent.
"""

from __future__ import annotations

import io
import time
from typing import TYPE_CHECKING

import httpx
from starlette.testclient import TestClient

from gateway.app import Gateway
from gateway.config import GatewayConfig
from gateway.gpu_health import GpuHealthMonitor, NvmlHealthReader
from gateway.metrics import GatewayMetrics, MetricsAgent, VllmScraper
from gateway.prompt import PromptBuilder
from gateway.routing import Router
from gateway.serving import InvocationService
from gateway.supervisor import Engine, EngineState
from gateway.upstream import Upstream
from tests.unit.gateway.nvml_double import FakeDevice, FakeNvml
from tests.unit.gateway_metrics.emf_spec import check_emf_output

if TYPE_CHECKING:
    import httpx2  # what starlette's TestClient answers with

NO_ENGINE = "http://127.0.0.1:9"  # never reached: the engine double takes no request


def engine_down(request: httpx.Request) -> httpx.Response:
    """In-memory stand-in for the engine's /metrics, answering as an engine that is down."""
    return httpx.Response(503)


class ReadyEngineDouble(Engine):
    """An engine that is up: the state the supervisor reports after a healthy start."""

    def __init__(self) -> None:
        self.base_url = NO_ENGINE
        self.state = EngineState.READY

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.state = EngineState.STOPPED


def wait_for_status(client: TestClient, status: int, timeout_s: float = 10.0) -> httpx2.Response:
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get("/ping")
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.02)


def test_an_uncorrectable_ecc_error_turns_ping_503_with_the_reason_and_emits_gpu_healthy_0(
    config: GatewayConfig, builder: PromptBuilder
) -> None:
    nvml = FakeNvml([FakeDevice(), FakeDevice()])
    metrics, out = GatewayMetrics(), io.StringIO()
    checks = config.gpu_health.model_copy(update={"interval_s": 0.05})
    monitor = GpuHealthMonitor(NvmlHealthReader(nvml), checks, metrics)
    scraper = VllmScraper(NO_ENGINE, client=httpx.AsyncClient(transport=httpx.MockTransport(engine_down)))
    agent = MetricsAgent(metrics, NO_ENGINE, "manga-chat", "primary", interval_s=3600, out=out, scraper=scraper)
    engine, upstream = ReadyEngineDouble(), Upstream()
    service = InvocationService(
        builder,
        Router(config.routing),
        engine,
        upstream=upstream,
        metrics=metrics,
        containment=config.containment,
        backend_version="v1",
    )
    gateway = Gateway(
        config, engine, service, httpx.AsyncClient(), upstream, background=[agent, monitor], gpu_health=monitor
    )
    gateway.state.warmed = True  # what the warm-up sets once base and adapters answered

    with TestClient(gateway.build_app()) as client:
        healthy = wait_for_status(client, 200)
        nvml.devices[1].ecc_volatile_uncorrectable = 2  # the driver counts an uncorrectable error on GPU 1
        failing = wait_for_status(client, 503)
    # Leaving the client ran the lifespan's end: the agent's last flush wrote what the monitor recorded.

    assert healthy.status_code == 200
    assert failing.status_code == 503
    assert failing.json() == {
        "status": "gpu_unhealthy",
        "reason": "GPU 1: 2 uncorrectable ECC errors since the driver loaded (limit 0)",
    }
    records = [r for r in check_emf_output(out.getvalue()) if "GpuHealthy" in r]
    values = [v for r in records for v in (r["GpuHealthy"] if isinstance(r["GpuHealthy"], list) else [r["GpuHealthy"]])]
    assert values[0] == 1.0 and values[-1] == 0.0, values
    assert all(r["EndpointName"] == "manga-chat" and r["VariantName"] == "primary" for r in records)
