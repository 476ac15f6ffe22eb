"""MetricsAgent: one interval = engine scrape + GPU readings + drained recorder, written as valid EMF.

Engine: captured real vLLM 0.32 bodies served by ``httpx.MockTransport`` (no socket in unit tests).
GPU: ``FakeGpuReader`` is a test double, since NVML needs a GPU; the real reader is tested here for the
no-GPU case and in ``tests/gpu/test_nvml_gpu.py`` on a GPU.
"""

from __future__ import annotations

import asyncio
import io
import logging
from typing import Any

import httpx
import pynvml
import pytest

from fleetops.metrics import MetricName
from gateway.metrics import (
    GATEWAY_COUNTERS,
    GatewayMetrics,
    GpuReading,
    MetricsAgent,
    NvmlGpuReader,
    VllmScraper,
    combine,
)

from .emf_spec import check_emf_output, metric_names

ENGINE = "http://127.0.0.1:8081"
ENGINE_NAMES = {"QueueDepth", "RunningRequests", "KvCacheUsagePercent", "PrefixCacheHitRate", "Preemptions"}


class FakeGpuReader:
    """Test double for NVML: two devices with fixed readings (or an error, to test containment)."""

    def __init__(self, readings: list[GpuReading] | None = None, error: Exception | None = None) -> None:
        self.readings = readings or []
        self.error = error
        self.closed = False

    def read(self) -> list[GpuReading]:
        if self.error is not None:
            raise self.error
        return self.readings

    def close(self) -> None:
        self.closed = True


def _engine(bodies: list[str | Exception]) -> tuple[VllmScraper, httpx.AsyncClient]:
    def handler(request: httpx.Request) -> httpx.Response:
        body = bodies.pop(0) if len(bodies) > 1 else bodies[0]
        if isinstance(body, Exception):
            raise body
        return httpx.Response(200, text=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return VllmScraper(ENGINE, client=client), client


def _agent(
    recorder: GatewayMetrics, out: io.StringIO, bodies: list[str | Exception], gpu: Any, interval_s: float = 10.0
) -> tuple[MetricsAgent, httpx.AsyncClient]:
    scraper, client = _engine(bodies)
    agent = MetricsAgent(
        recorder, ENGINE, "manga-chat-prod", "canary", interval_s=interval_s, out=out, gpu=gpu, scraper=scraper
    )
    return agent, client


def test_an_interval_carries_engine_gateway_and_gpu_metrics(warm_text: str, load_text: str) -> None:
    recorder, out = GatewayMetrics(), io.StringIO()
    gpu = FakeGpuReader([GpuReading(0, 93.0, 81.25), GpuReading(1, 41.0, 80.0)])

    async def main() -> None:
        agent, client = _agent(recorder, out, [warm_text, load_text], gpu)
        async with client:
            await agent.flush_once()  # baseline scrape
            out.truncate(0)
            out.seek(0)
            recorder.increment(MetricName.REQUESTS, 3)
            recorder.increment(MetricName.BUDGET_TRIMS)
            for ttft in (35.0, 48.0, 410.0):
                recorder.observe(MetricName.TIME_TO_FIRST_TOKEN, ttft)
            await agent.flush_once()

    asyncio.run(main())
    main_record, gpu0, gpu1 = check_emf_output(out.getvalue())

    assert metric_names(main_record) >= ENGINE_NAMES
    assert main_record["PrefixCacheHitRate"] == pytest.approx(100 * 3840 / 4992)
    assert main_record["QueueDepth"] == 2.0
    assert main_record["RunningRequests"] == 6.0
    assert main_record["Requests"] == 3.0
    assert main_record["BudgetTrims"] == 1.0
    assert main_record["BreakerTrips"] == 0.0
    assert {str(n) for n in GATEWAY_COUNTERS} <= metric_names(main_record)
    assert main_record["TimeToFirstTokenMs"] == [35.0, 48.0, 410.0]
    assert main_record["EndpointName"] == "manga-chat-prod"
    assert main_record["VariantName"] == "canary"
    assert "Gpu" not in main_record
    assert (gpu0["Gpu"], gpu0["GpuUtilization"], gpu0["GpuMemoryUsedPercent"]) == ("0", 93.0, 81.25)
    assert (gpu1["Gpu"], gpu1["GpuUtilization"], gpu1["GpuMemoryUsedPercent"]) == ("1", 41.0, 80.0)
    assert gpu1["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [
        ["EndpointName", "VariantName", "Gpu"],
        ["EndpointName", "VariantName"],
    ]


def test_a_dead_engine_and_a_broken_gpu_still_give_the_gateway_metrics(caplog: pytest.LogCaptureFixture) -> None:
    recorder, out = GatewayMetrics(), io.StringIO()
    gpu = FakeGpuReader(error=RuntimeError("NVML: GPU is lost"))
    recorder.increment(MetricName.BREAKER_TRIPS)
    recorder.increment(MetricName.ENGINE_RESTARTS)

    async def main() -> None:
        agent, client = _agent(recorder, out, [httpx.ConnectError("connection refused")], gpu)
        async with client:
            await agent.flush_once()

    asyncio.run(main())
    [record] = check_emf_output(out.getvalue())

    assert not ENGINE_NAMES & metric_names(record)
    assert record["BreakerTrips"] == 1.0
    assert record["EngineRestarts"] == 1.0
    assert "GPU is lost" in caplog.text


def test_a_broken_output_stream_is_logged_not_raised(caplog: pytest.LogCaptureFixture, idle_text: str) -> None:
    out = io.StringIO()
    out.close()

    async def main() -> None:
        agent, client = _agent(GatewayMetrics(), out, [idle_text], FakeGpuReader())
        async with client:
            await agent.flush_once()

    asyncio.run(main())

    assert "writing EMF failed" in caplog.text


def test_start_flushes_every_interval_and_stop_flushes_the_rest(idle_text: str) -> None:
    recorder, out = GatewayMetrics(), io.StringIO()
    gpu = FakeGpuReader()

    async def main() -> None:
        agent, client = _agent(recorder, out, [idle_text], gpu, interval_s=0.05)
        async with client:
            await agent.start()
            await agent.start()  # a second start is a no-op, not a second loop
            recorder.increment(MetricName.REQUESTS)
            await asyncio.sleep(0.28)
            recorder.increment(MetricName.FALLBACKS, 2)  # after the last tick (a late tick may take it)
            await agent.stop()

    asyncio.run(main())
    records = check_emf_output(out.getvalue())

    # ~5 ticks in 0.28 s at 0.05 s (bounded generously: a busy 2-core machine may delay some) + the final flush.
    assert 3 <= len(records) <= 7
    assert sum(r["Requests"] for r in records) == 1.0
    assert sum(r["Fallbacks"] for r in records) == 2.0  # nothing recorded before stop() is lost
    assert gpu.closed


def test_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s must be positive"):
        MetricsAgent(GatewayMetrics(), ENGINE, "e", "v", interval_s=0, out=io.StringIO(), gpu=FakeGpuReader())


def test_the_sampling_cap_is_logged(caplog: pytest.LogCaptureFixture, idle_text: str) -> None:
    recorder, out = GatewayMetrics(max_samples=10), io.StringIO()
    for value in range(25):
        recorder.observe(MetricName.TOKENS_IN, float(value))

    async def main() -> None:
        agent, client = _agent(recorder, out, [idle_text], FakeGpuReader())
        async with client:
            with caplog.at_level(logging.INFO, logger="gateway.metrics.agent"):
                await agent.flush_once()

    asyncio.run(main())
    [record] = check_emf_output(out.getvalue())

    assert len(record["TokensIn"]) == 10
    assert "TokensIn" in caplog.text


def test_real_nvml_reader_without_nvml_returns_nothing_and_logs_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # nvmlInit is made to fail as it does on a machine without the NVIDIA driver, whatever this machine has.
    def no_driver() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    reader = NvmlGpuReader()

    with caplog.at_level(logging.INFO, logger="gateway.metrics.gpu"):
        readings = [reader.read(), reader.read()]
    reader.close()

    assert readings == [[], []]
    assert [r.getMessage() for r in caplog.records] == [
        "NVML unavailable (NVML Shared Library Not Found): no GPU metrics will be emitted"
    ]


def test_a_name_used_as_counter_and_distribution_is_flagged(caplog: pytest.LogCaptureFixture) -> None:
    recorder = GatewayMetrics()
    recorder.increment(MetricName.TOKENS_OUT, 100)
    recorder.observe(MetricName.TOKENS_OUT, 32.0)

    metrics = combine({}, recorder.drain())

    assert metrics[MetricName.TOKENS_OUT] == [32.0]
    assert "both incremented and observed" in caplog.text
    assert "TokensOut" in caplog.text


def test_an_engine_death_is_its_own_record_under_its_cause(idle_text: str) -> None:
    """What the supervisor records for a CUDA OOM death: the totals in the main line, the cause in its own."""
    recorder, out = GatewayMetrics(), io.StringIO()
    for name in (MetricName.ENGINE_DEATHS, MetricName.OOM_CAUGHT):
        recorder.increment(name)
    properties = {"log_type": "engine_death", "cause": "cuda_oom", "phase": "serving", "exit_status": "exit 1"}
    recorder.record_event({"Cause": "cuda_oom"}, [MetricName.ENGINE_DEATHS, MetricName.OOM_CAUGHT], properties)

    async def main() -> None:
        scraper, client = _engine([idle_text])
        agent = MetricsAgent(recorder, ENGINE, "manga-chat-prod", "canary", out=out, gpu=FakeGpuReader(),
                             scraper=scraper, model_version="v7")  # fmt: skip
        async with client:
            await agent.flush_once()

    asyncio.run(main())
    main_record, death = check_emf_output(out.getvalue())

    assert (main_record["OomCaught"], main_record["EngineDeaths"]) == (1.0, 1.0)
    assert "Cause" not in main_record
    assert death["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["EndpointName", "VariantName", "Cause"]]
    assert metric_names(death) == {"EngineDeaths", "OomCaught"}
    assert (death["Cause"], death["OomCaught"], death["EngineDeaths"]) == ("cuda_oom", 1.0, 1.0)
    assert (death["log_type"], death["cause"], death["phase"], death["exit_status"], death["model_version"]) == (
        "engine_death",
        "cuda_oom",
        "serving",
        "exit 1",
        "v7",
    )
