"""Real NVML readings through the gateway's reader and agent (runs only on a GPU machine)."""

from __future__ import annotations

import asyncio
import io

import pynvml
import pytest

from gateway.metrics import GatewayMetrics, MetricsAgent, NvmlGpuReader, VllmScraper
from tests.unit.gateway_metrics.emf_spec import check_emf_output

pytestmark = pytest.mark.gpu


def test_one_reading_per_device_within_range() -> None:
    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    reader = NvmlGpuReader()

    readings = reader.read()
    reader.close()

    assert [r.index for r in readings] == list(range(count))
    for reading in readings:
        assert 0.0 <= reading.utilization_percent <= 100.0
        assert 0.0 < reading.memory_used_percent <= 100.0


def test_memory_used_follows_a_real_allocation() -> None:
    import torch  # the GPU machine has torch with CUDA

    assert torch.cuda.is_available(), "NVML sees a GPU but torch cannot use it"
    reader = NvmlGpuReader()
    index = torch.cuda.current_device()
    before = reader.read()[index].memory_used_percent
    total = torch.cuda.get_device_properties(index).total_memory
    block = torch.empty(int(total * 0.10), dtype=torch.uint8, device="cuda")  # 10 % of the device
    torch.cuda.synchronize()

    during = reader.read()[index].memory_used_percent
    del block
    torch.cuda.empty_cache()
    reader.close()

    assert during - before == pytest.approx(10.0, abs=2.0)


def test_agent_emits_valid_per_gpu_emf_from_real_nvml() -> None:
    out = io.StringIO()

    async def main() -> None:
        # No engine on this machine: the scrape fails, and the agent must still emit the GPU lines.
        agent = MetricsAgent(
            GatewayMetrics(),
            "http://127.0.0.1:9",
            "gpu-test",
            "primary",
            out=out,
            scraper=VllmScraper("http://127.0.0.1:9"),
        )
        await agent.flush_once()
        await agent.stop()

    asyncio.run(main())
    records = check_emf_output(out.getvalue())
    gpu_records = [r for r in records if "Gpu" in r]

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    assert len(gpu_records) == 2 * count  # one per device per flush (flush_once, then stop's final flush)
    for record in gpu_records:
        assert 0.0 <= record["GpuUtilization"] <= 100.0
        assert 0.0 < record["GpuMemoryUsedPercent"] <= 100.0
