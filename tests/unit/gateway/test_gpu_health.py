"""GPU health: the NVML reader and the monitor on ``FakeNvml`` (a test double: no GPU here, see its module),
and the ``gpu_health`` section of ``gateway.yaml``. ``tests/gpu`` runs the same reader on a real GPU."""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

import pynvml
import pytest

from fleetops.metrics import MetricName
from gateway.config import DEFAULT_CONFIG, GatewayConfigError, GpuHealthConfig, load_gateway_config
from gateway.gpu_health import DeviceReading, GpuHealthMonitor, Health, NvmlHealthReader, assess
from gateway.metrics import GatewayMetrics
from tests.unit.gateway.nvml_double import FAKED_CALLS, FakeDevice, FakeNvml

if TYPE_CHECKING:
    from pathlib import Path

CHECKS = GpuHealthConfig()


def check(nvml: FakeNvml, checks: GpuHealthConfig = CHECKS) -> tuple[GpuHealthMonitor, GatewayMetrics]:
    """A monitor on the double after one check."""
    metrics = GatewayMetrics()
    monitor = GpuHealthMonitor(NvmlHealthReader(nvml), checks, metrics)
    asyncio.run(monitor.check_once())
    return monitor, metrics


def recorded(metrics: GatewayMetrics) -> list[float]:
    return metrics.drain().observations.get(MetricName.GPU_HEALTHY, [])


def test_the_double_has_pynvmls_signatures() -> None:
    for name in FAKED_CALLS:
        real = list(inspect.signature(getattr(pynvml, name)).parameters)
        fake = list(inspect.signature(getattr(FakeNvml(), name)).parameters)
        assert fake == real, name


def test_healthy_gpus_keep_ping_up_and_record_one() -> None:
    monitor, metrics = check(FakeNvml([FakeDevice(), FakeDevice()]))

    assert monitor.verdict.health is Health.HEALTHY
    assert monitor.unhealthy_reason is None
    assert recorded(metrics) == [1.0]


def test_an_uncorrectable_ecc_error_since_the_driver_loaded_is_unhealthy() -> None:
    monitor, metrics = check(FakeNvml([FakeDevice(), FakeDevice(ecc_volatile_uncorrectable=3)]))

    assert monitor.verdict.health is Health.UNHEALTHY
    assert monitor.unhealthy_reason == "GPU 1: 3 uncorrectable ECC errors since the driver loaded (limit 0)"
    assert recorded(metrics) == [0.0]


def test_the_lifetime_ecc_count_is_checked_only_with_a_limit() -> None:
    old_errors = FakeDevice(ecc_aggregate_uncorrectable=5)

    assert check(FakeNvml([old_errors]))[0].verdict.health is Health.HEALTHY  # the shipped default: off
    limited = CHECKS.model_copy(update={"ecc_aggregate_uncorrectable_max": 4})
    monitor, _ = check(FakeNvml([old_errors]), limited)
    assert monitor.unhealthy_reason == "GPU 0: 5 uncorrectable ECC errors in its lifetime (limit 4)"


def test_a_lost_gpu_is_unhealthy() -> None:
    monitor, metrics = check(FakeNvml([FakeDevice(lost=True)]))

    assert monitor.unhealthy_reason == "GPU 0: lost (NVMLError_GpuIsLost: GPU is lost)"
    assert recorded(metrics) == [0.0]


def test_a_gpu_present_at_start_then_lost_is_unhealthy() -> None:
    nvml = FakeNvml([FakeDevice(), FakeDevice()])
    metrics = GatewayMetrics()
    monitor = GpuHealthMonitor(NvmlHealthReader(nvml), CHECKS, metrics)

    asyncio.run(monitor.check_once())
    assert monitor.verdict.health is Health.HEALTHY
    nvml.devices[0].lost = True
    asyncio.run(monitor.check_once())

    assert monitor.unhealthy_reason == "GPU 0: lost (NVMLError_GpuIsLost: GPU is lost)"
    assert recorded(metrics) == [1.0, 0.0]


def test_a_gpu_that_fell_off_the_bus_is_unhealthy() -> None:
    nvml = FakeNvml([FakeDevice(), FakeDevice()])
    monitor = GpuHealthMonitor(NvmlHealthReader(nvml), CHECKS, GatewayMetrics())
    asyncio.run(monitor.check_once())

    nvml.fall_off_the_bus(1)
    asyncio.run(monitor.check_once())

    assert monitor.unhealthy_reason == "GPU 1: lost (NVML lists 1 of the 2 devices seen at start)"


def test_a_pending_page_retirement_is_unhealthy_on_a_gpu_that_retires_pages() -> None:
    pre_ampere = FakeDevice(retired_pages_pending=1, remapped_rows=pynvml.NVMLError_NotSupported())

    monitor, _ = check(FakeNvml([pre_ampere]))
    assert monitor.unhealthy_reason == "GPU 0: a memory page retirement is pending (needs a GPU reset)"
    off = CHECKS.model_copy(update={"pending_repair": False})
    assert check(FakeNvml([pre_ampere]), off)[0].verdict.health is Health.HEALTHY


def test_row_remapping_pending_or_failed_is_unhealthy() -> None:
    pending = FakeDevice(remapped_rows=(0, 1, 1, 0))
    failed = FakeDevice(remapped_rows=(0, 9, 0, 1))

    monitor, _ = check(FakeNvml([pending, failed]))

    assert monitor.verdict.reasons == (
        "GPU 0: a memory row remap is pending (needs a GPU reset)",
        "GPU 1: row remapping failed (no spare rows left)",
    )


def test_a_critical_xid_is_unhealthy_and_another_xid_is_not() -> None:
    nvml = FakeNvml([FakeDevice()])
    monitor = GpuHealthMonitor(NvmlHealthReader(nvml), CHECKS, GatewayMetrics())
    asyncio.run(monitor.check_once())  # NVML starts and the device is registered for Xid events

    nvml.xid(0, 13)  # a graphics engine exception: an application fault, not the GPU's
    asyncio.run(monitor.check_once())
    assert monitor.verdict.health is Health.HEALTHY
    nvml.xid(0, 79)
    asyncio.run(monitor.check_once())
    assert monitor.unhealthy_reason == "GPU 0: critical Xid 79"


def test_no_nvml_at_all_is_not_checked_and_records_nothing() -> None:
    nvml = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound())
    metrics = GatewayMetrics()
    monitor = GpuHealthMonitor(NvmlHealthReader(nvml), CHECKS, metrics)

    for _ in range(2):
        asyncio.run(monitor.check_once())

    assert monitor.verdict.health is Health.NOT_CHECKED
    assert monitor.unhealthy_reason is None
    assert recorded(metrics) == []
    assert nvml.calls == ["nvmlInit"]  # tried once, not at every check


def test_nvml_without_a_device_is_not_checked() -> None:
    monitor, metrics = check(FakeNvml([]))

    assert monitor.verdict.health is Health.NOT_CHECKED
    assert recorded(metrics) == []


def test_a_reading_nvml_cannot_give_is_not_a_fault() -> None:
    ecc_off = FakeDevice(
        ecc_volatile_uncorrectable=pynvml.NVMLError_NotSupported(),
        ecc_aggregate_uncorrectable=pynvml.NVMLError_Unknown(),
        remapped_rows=pynvml.NVMLError_NoPermission(),
    )

    monitor, _ = check(FakeNvml([ecc_off]))

    assert monitor.verdict.health is Health.HEALTHY


def test_unhealthy_is_final_for_the_process() -> None:
    device = FakeDevice(ecc_volatile_uncorrectable=1)
    nvml = FakeNvml([device])
    metrics = GatewayMetrics()
    monitor = GpuHealthMonitor(NvmlHealthReader(nvml), CHECKS, metrics)
    asyncio.run(monitor.check_once())

    device.ecc_volatile_uncorrectable = 0  # what a driver reload would show: this process never sees one
    asyncio.run(monitor.check_once())

    assert monitor.unhealthy_reason == "GPU 0: 1 uncorrectable ECC errors since the driver loaded (limit 0)"
    assert recorded(metrics) == [0.0, 0.0]


def test_a_broken_reader_keeps_the_previous_verdict() -> None:
    class BrokenReader:  # a bug in a reader, not an NVML answer
        def read(self) -> list[DeviceReading] | None:
            raise RuntimeError("bug")

        def close(self) -> None:
            pass

    monitor = GpuHealthMonitor(BrokenReader(), CHECKS, GatewayMetrics())

    assert asyncio.run(monitor.check_once()).health is Health.NOT_CHECKED


def test_the_monitor_checks_every_interval_until_stopped() -> None:
    nvml = FakeNvml([FakeDevice()])
    metrics = GatewayMetrics()
    monitor = GpuHealthMonitor(NvmlHealthReader(nvml), CHECKS.model_copy(update={"interval_s": 0.01}), metrics)

    async def run() -> None:
        await monitor.start()
        await asyncio.sleep(0.02)
        nvml.devices[0].ecc_volatile_uncorrectable = 2
        for _ in range(200):
            if monitor.unhealthy_reason:
                break
            await asyncio.sleep(0.01)
        await monitor.stop()

    asyncio.run(run())

    assert monitor.unhealthy_reason is not None
    assert not nvml.initialised  # stop shut NVML down
    values = recorded(metrics)
    assert values[0] == 1.0 and values[-1] == 0.0


def test_assess_lists_every_problem_of_every_device() -> None:
    readings = [
        DeviceReading(0, ecc_volatile_uncorrectable=1, remap_failure=True, xids=(48, 13)),
        DeviceReading(1, lost="NVMLError_GpuIsLost: GPU is lost", ecc_volatile_uncorrectable=9),
    ]

    assert assess(readings, CHECKS).reasons == (
        "GPU 0: 1 uncorrectable ECC errors since the driver loaded (limit 0)",
        "GPU 0: row remapping failed (no spare rows left)",
        "GPU 0: critical Xid 48",
        "GPU 1: lost (NVMLError_GpuIsLost: GPU is lost)",
    )


def test_the_shipped_file_checks_the_gpu() -> None:
    checks = load_gateway_config(DEFAULT_CONFIG).gpu_health

    assert checks.enabled and checks.ecc_volatile_uncorrectable_max == 0
    assert 79 in checks.critical_xids


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ({"interval_s": 0}, "gpu_health.interval_s"),
        ({"ecc_volatile_uncorrectable_max": -1}, "gpu_health.ecc_volatile_uncorrectable_max"),
        ({"critical_xids": [79, 0]}, "gpu_health.critical_xids.1"),
        ({"xid": [79]}, "gpu_health.xid"),
    ],
)
def test_a_wrong_gpu_health_section_is_refused_naming_the_field(
    tmp_path: Path, section: dict[str, Any], named: str
) -> None:
    import yaml

    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["gpu_health"] = section
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))

    with pytest.raises(GatewayConfigError) as refused:
        load_gateway_config(path)

    assert any(f": {named}: " in problem for problem in refused.value.problems), refused.value.problems
