"""GPU health for ``/ping``: NVML readings in, a verdict out; an unhealthy GPU makes SageMaker replace the instance.

Three parts: :func:`assess`, a pure decision (readings and the configured checks -> healthy, unhealthy with
reasons, or not checked); :class:`NvmlHealthReader`, a thin adapter that reads a ``pynvml``-shaped module
given from outside; :class:`GpuHealthMonitor`, which runs the check every ``gpu_health.interval_s``, keeps
the verdict ``/ping`` reads and records ``GpuHealthy`` (1 or 0 per check) for the metrics agent's EMF.

No NVML, or NVML with no device (a CPU machine), is "not checked": ``/ping`` ignores the GPU and no
``GpuHealthy`` value is recorded. A device that answered at start-up and no longer does is lost, and lost is
unhealthy. An unhealthy verdict is final for the process: a lost device, an uncorrectable error or a
pending repair do not heal without a GPU reset, and a ``/ping`` that flapped would keep a bad instance in
service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from fleetops.metrics import MetricName

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from gateway.config import GpuHealthConfig
    from gateway.metrics import GatewayMetrics

logger = logging.getLogger(__name__)

#: Most Xid events taken off NVML's queue per check (the rest wait for the next one).
MAX_EVENTS_PER_READ = 64


class Health(StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    NOT_CHECKED = "not_checked"  # no NVML or no GPU: nothing to say about a GPU


@dataclass(frozen=True)
class DeviceReading:
    """One device at one check. ``None``: this GPU does not expose that reading (ECC off, an older or newer
    generation: page retirement before Ampere, row remapping from Ampere on)."""

    index: int
    lost: str | None = None  # why the device cannot be reached; None while it answers
    ecc_volatile_uncorrectable: int | None = None
    ecc_aggregate_uncorrectable: int | None = None
    retirement_pending: bool | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    xids: tuple[int, ...] = ()  # Xid critical-error events since the previous check


@dataclass(frozen=True)
class Verdict:
    health: Health
    reasons: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


NOT_CHECKED = Verdict(Health.NOT_CHECKED)


def assess(readings: Sequence[DeviceReading] | None, checks: GpuHealthConfig) -> Verdict:
    """Decide from one check's readings (``None``: NVML is not there).

    Examples
    --------
    >>> from gateway.config import GpuHealthConfig
    >>> checks = GpuHealthConfig()
    >>> assess(None, checks).health, assess([], checks).health
    (<Health.NOT_CHECKED: 'not_checked'>, <Health.NOT_CHECKED: 'not_checked'>)
    >>> assess([DeviceReading(0, ecc_volatile_uncorrectable=0, remap_pending=False)], checks).health
    <Health.HEALTHY: 'healthy'>
    >>> assess([DeviceReading(0), DeviceReading(1, ecc_volatile_uncorrectable=2)], checks).reason
    'GPU 1: 2 uncorrectable ECC errors since the driver loaded (limit 0)'
    """
    if not readings:
        return NOT_CHECKED
    reasons = tuple(problem for reading in readings for problem in _problems(reading, checks))
    return Verdict(Health.UNHEALTHY, reasons) if reasons else Verdict(Health.HEALTHY)


def _problems(reading: DeviceReading, checks: GpuHealthConfig) -> list[str]:
    gpu = f"GPU {reading.index}"
    if reading.lost is not None:
        return [f"{gpu}: lost ({reading.lost})"]  # nothing else can be read from it
    problems: list[str] = []
    limit = checks.ecc_volatile_uncorrectable_max
    if limit is not None and (reading.ecc_volatile_uncorrectable or 0) > limit:
        count = reading.ecc_volatile_uncorrectable
        problems.append(f"{gpu}: {count} uncorrectable ECC errors since the driver loaded (limit {limit})")
    limit = checks.ecc_aggregate_uncorrectable_max
    if limit is not None and (reading.ecc_aggregate_uncorrectable or 0) > limit:
        count = reading.ecc_aggregate_uncorrectable
        problems.append(f"{gpu}: {count} uncorrectable ECC errors in its lifetime (limit {limit})")
    if checks.pending_repair and reading.retirement_pending:
        problems.append(f"{gpu}: a memory page retirement is pending (needs a GPU reset)")
    if checks.pending_repair and reading.remap_pending:
        problems.append(f"{gpu}: a memory row remap is pending (needs a GPU reset)")
    if checks.row_remap_failure and reading.remap_failure:
        problems.append(f"{gpu}: row remapping failed (no spare rows left)")
    critical = sorted(set(reading.xids) & set(checks.critical_xids))
    if critical:
        problems.append(f"{gpu}: critical Xid {', '.join(map(str, critical))}")
    return problems


class HealthReader(Protocol):
    """What the monitor needs from a GPU source."""

    def read(self) -> list[DeviceReading] | None:
        """One reading per device; ``[]`` without a device, ``None`` without NVML."""
        ...

    def close(self) -> None: ...


class _DeviceLost(Exception):
    pass


class NvmlHealthReader:
    """Reads health through an NVML module (``pynvml``; a test passes a double): never raises.

    NVML is initialised on the first :meth:`read`; the devices it lists then are the ones expected from
    then on. Each device is registered for Xid critical-error events where NVML supports it. A reading
    NVML does not support (``NVMLError_NotSupported``, and any other error but a lost GPU) is ``None``,
    not a problem; ``NVMLError_GpuIsLost`` or ``NVMLError_ResetRequired`` on any call, a device whose
    handle cannot be had, or a device count below the start-up one, is a lost device.
    """

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._state = "new"  # -> "on" (NVML answered at start) or "off" (no NVML: nothing is ever checked)
        self._expected = 0
        self._events: Any = None
        self._logged: set[tuple[int, str]] = set()

    def read(self) -> list[DeviceReading] | None:
        if not self._start():
            return None
        nvml = self._nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as exc:
            return [DeviceReading(i, lost=f"device count unreadable: {_name(exc)}") for i in range(self._expected)]
        xids = self._drain_xids()
        return [self._read_device(i, count, tuple(xids.get(i, ()))) for i in range(max(count, self._expected))]

    def close(self) -> None:
        if self._state != "on":
            return
        nvml = self._nvml
        with contextlib.suppress(nvml.NVMLError):
            if self._events is not None:
                nvml.nvmlEventSetFree(self._events)
            nvml.nvmlShutdown()
        self._state = "off"

    def _start(self) -> bool:
        if self._state != "new":
            return self._state == "on"
        nvml = self._nvml
        try:
            nvml.nvmlInit()
            self._expected = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as exc:
            logger.info("GPU health not checked: NVML unavailable (%s)", _name(exc))
            self._state = "off"
            return False
        self._state = "on"
        self._register_xids()
        logger.info("GPU health: checking %d device(s) with NVML", self._expected)
        return True

    def _register_xids(self) -> None:
        nvml = self._nvml
        try:
            self._events = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            logger.info("GPU health: Xid events not available (%s)", _name(exc))
            return
        for index in range(self._expected):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._events)
            except nvml.NVMLError as exc:
                logger.info("GPU health: Xid events of GPU %d not available (%s)", index, _name(exc))

    def _drain_xids(self) -> dict[int, list[int]]:
        nvml = self._nvml
        found: dict[int, list[int]] = {}
        if self._events is None:
            return found
        for _ in range(MAX_EVENTS_PER_READ):
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)  # 0 ms: only what is already queued
                index = int(nvml.nvmlDeviceGetIndex(event.device))
            except nvml.NVMLError_Timeout:
                break
            except nvml.NVMLError as exc:
                self._log_once(-1, "xid", exc)
                break
            if int(event.eventType) & nvml.nvmlEventTypeXidCriticalError:
                found.setdefault(index, []).append(int(event.eventData))
        return found

    def _read_device(self, index: int, count: int, xids: tuple[int, ...]) -> DeviceReading:
        nvml = self._nvml
        if index >= count:
            return DeviceReading(index, lost=f"NVML lists {count} of the {self._expected} devices seen at start")
        try:
            handle = self._ask(index, "handle", nvml.nvmlDeviceGetHandleByIndex, index, required=True)
            volatile = self._ask(
                index,
                "ecc_volatile",
                nvml.nvmlDeviceGetTotalEccErrors,
                handle,
                nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nvml.NVML_VOLATILE_ECC,
            )
            aggregate = self._ask(
                index,
                "ecc_aggregate",
                nvml.nvmlDeviceGetTotalEccErrors,
                handle,
                nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nvml.NVML_AGGREGATE_ECC,
            )
            retirement = self._ask(index, "retirement", nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
            remap = self._ask(index, "remap", nvml.nvmlDeviceGetRemappedRows, handle)
        except _DeviceLost as exc:
            return DeviceReading(index, lost=str(exc), xids=xids)
        return DeviceReading(
            index,
            ecc_volatile_uncorrectable=None if volatile is None else int(volatile),
            ecc_aggregate_uncorrectable=None if aggregate is None else int(aggregate),
            retirement_pending=None if retirement is None else bool(retirement),
            remap_pending=None if remap is None else bool(remap[2]),  # (corrected, uncorrected, pending, failure)
            remap_failure=None if remap is None else bool(remap[3]),
            xids=xids,
        )

    def _ask(self, index: int, what: str, call: Callable[..., Any], *args: Any, required: bool = False) -> Any:
        """One NVML call: its value, ``None`` when this GPU cannot answer it, :class:`_DeviceLost` when the GPU is
        gone (or, for a ``required`` call such as the handle, on any error: nothing else can be read)."""
        nvml = self._nvml
        try:
            return call(*args)
        except (nvml.NVMLError_GpuIsLost, nvml.NVMLError_ResetRequired) as exc:
            raise _DeviceLost(_name(exc)) from None
        except nvml.NVMLError as exc:
            if required:
                raise _DeviceLost(f"{what}: {_name(exc)}") from None
            if not isinstance(exc, nvml.NVMLError_NotSupported):
                self._log_once(index, what, exc)
            return None

    def _log_once(self, index: int, what: str, exc: Exception) -> None:
        # Every check would repeat it: once per device and reading is enough to see it in the logs.
        if (index, what) not in self._logged:
            self._logged.add((index, what))
            logger.warning("GPU health: NVML %s of GPU %d failed, not checked (%s)", what, index, _name(exc))


def _name(exc: Exception) -> str:
    """An NVML error as its class and message, e.g. ``NVMLError_GpuIsLost: GPU is lost``."""
    return f"{type(exc).__name__}: {exc}"


class GpuHealthMonitor:
    """Checks every ``checks.interval_s``; ``/ping`` reads :attr:`verdict` (no I/O on the ping path).

    Parameters
    ----------
    reader
        The GPU source (:class:`NvmlHealthReader` in the container).
    checks
        ``gateway.yaml``'s ``gpu_health`` section.
    metrics
        Receives ``GpuHealthy`` (1 or 0) per check that had a GPU to check.
    """

    def __init__(self, reader: HealthReader, checks: GpuHealthConfig, metrics: GatewayMetrics) -> None:
        self._reader = reader
        self._checks = checks
        self._metrics = metrics
        self.verdict: Verdict = NOT_CHECKED
        self._task: asyncio.Task[None] | None = None

    @property
    def unhealthy_reason(self) -> str | None:
        """Why ``/ping`` must fail, or ``None`` while the GPU is healthy or not checked."""
        return self.verdict.reason if self.verdict.health is Health.UNHEALTHY else None

    async def check_once(self) -> Verdict:
        """Read, decide, record; never raises (a broken reader must not take ``/ping`` down with it)."""
        try:
            readings = await asyncio.to_thread(self._reader.read)
        except Exception:
            logger.exception("GPU health check failed to read; the previous verdict stands")
            return self.verdict
        verdict = assess(readings, self._checks)
        if self.verdict.health is not Health.UNHEALTHY:  # unhealthy is final: see the module's docstring
            if verdict.health is Health.UNHEALTHY:
                logger.error(
                    "GPU unhealthy, /ping now answers 503: %s",
                    verdict.reason,
                    extra={"event": "gpu_unhealthy", "reasons": list(verdict.reasons)},
                )
            self.verdict = verdict
        if self.verdict.health is not Health.NOT_CHECKED:
            self._metrics.observe(MetricName.GPU_HEALTHY, 1.0 if self.verdict.health is Health.HEALTHY else 0.0)
        return self.verdict

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="gpu-health")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._reader.close()

    async def _run(self) -> None:
        # Without NVML a check returns at once, so a CPU machine pays nothing for polling on.
        while True:
            await self.check_once()
            await asyncio.sleep(self._checks.interval_s)
