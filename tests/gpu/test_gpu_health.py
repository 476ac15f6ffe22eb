"""The GPU health check on real NVML (runs only on a GPU machine): what the reader gets from a real driver, and
the verdict a working GPU must get. A fault cannot be caused on a real GPU; ``tests/unit/gateway`` covers those
with a double of NVML."""

from __future__ import annotations

import asyncio

import pynvml
import pytest

from fleetops.metrics import MetricName
from gateway.config import DEFAULT_CONFIG, load_gateway_config
from gateway.gpu_health import GpuHealthMonitor, Health, NvmlHealthReader

pytestmark = pytest.mark.gpu


def device_count() -> int:
    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def uncorrected_ecc(index: int, counter: int) -> int | None:
    """NVML's uncorrected ECC count of device ``index`` (``NVML_VOLATILE_ECC`` or ``_AGGREGATE_ECC``), asked directly;
    None where the device does not support it (ECC off)."""
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        try:
            return int(pynvml.nvmlDeviceGetTotalEccErrors(handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter))
        except pynvml.NVMLError_NotSupported:
            return None
    finally:
        pynvml.nvmlShutdown()


def test_the_reader_reads_every_device_of_a_real_driver() -> None:
    reader = NvmlHealthReader(pynvml)

    readings = reader.read()
    again = reader.read()  # the Xid event queue is drained without blocking
    reader.close()

    assert readings is not None and again is not None
    assert [r.index for r in readings] == list(range(device_count()))
    for reading in readings:
        assert reading.lost is None, reading
        # The reader's ECC counts are NVML's own for that device and counter (None exactly where NVML has none:
        # ECC off), and a working GPU has had no uncorrectable error since the driver loaded (the shipped limit, 0).
        assert reading.ecc_volatile_uncorrectable == uncorrected_ecc(reading.index, pynvml.NVML_VOLATILE_ECC), reading
        assert reading.ecc_aggregate_uncorrectable == uncorrected_ecc(reading.index, pynvml.NVML_AGGREGATE_ECC), reading
        assert reading.ecc_volatile_uncorrectable in (None, 0), reading
        # A data-centre GPU exposes page retirement (before Ampere) or row remapping (from Ampere).
        assert reading.retirement_pending is not None or reading.remap_pending is not None, reading
        print(reading)  # what this driver exposes, in the test log


def test_a_working_gpu_is_healthy_and_recorded_as_one() -> None:
    from gateway.metrics import GatewayMetrics

    metrics = GatewayMetrics()
    monitor = GpuHealthMonitor(NvmlHealthReader(pynvml), load_gateway_config(DEFAULT_CONFIG).gpu_health, metrics)

    async def run() -> None:
        await monitor.check_once()
        await monitor.stop()

    asyncio.run(run())

    assert monitor.verdict.health is Health.HEALTHY, monitor.verdict.reason
    assert metrics.drain().observations[MetricName.GPU_HEALTHY] == [1.0]
