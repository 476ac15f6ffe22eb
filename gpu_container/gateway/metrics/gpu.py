"""GPU utilisation and memory per device from NVML (``pynvml`` from nvidia-ml-py); nothing without a GPU."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuReading:
    """One device at one moment: NVML index, utilisation and memory used, both in percent."""

    index: int
    utilization_percent: float
    memory_used_percent: float


class GpuReader(Protocol):
    """What the agent needs from a GPU source."""

    def read(self) -> list[GpuReading]:
        """Return one reading per device; an empty list when there is no GPU."""
        ...


class NvmlGpuReader:
    """Reads every device through NVML.

    NVML is initialised on the first :meth:`read`. Without a driver or a GPU, ``nvmlInit`` fails: the
    reader logs one line, returns ``[]`` from then on and never raises. A device that stops answering
    is left out of that interval (with a log line) while the others are still read.

    What it returns depends on the machine (``[]`` without a GPU), so no example runs here; the
    agent's example uses an in-memory :class:`GpuReader` instead.
    """

    def __init__(self) -> None:
        self._initialised = False
        self._unavailable = False

    def _init(self) -> bool:
        if self._initialised or self._unavailable:
            return self._initialised
        import pynvml

        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            logger.info("NVML unavailable (%s): no GPU metrics will be emitted", exc)
            self._unavailable = True
            return False
        self._initialised = True
        return True

    def read(self) -> list[GpuReading]:
        """Read utilisation and memory of every device; ``[]`` without NVML."""
        if not self._init():
            return []
        import pynvml

        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except pynvml.NVMLError as exc:
            logger.warning("NVML device count failed: %s", exc)
            return []
        readings: list[GpuReading] = []
        for index in range(count):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                utilization = pynvml.nvmlDeviceGetUtilizationRates(handle)
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            except pynvml.NVMLError as exc:
                logger.warning("NVML read of GPU %d failed, leaving it out this interval: %s", index, exc)
                continue
            used_percent = 100.0 * float(memory.used) / float(memory.total) if memory.total else 0.0
            readings.append(GpuReading(index, float(utilization.gpu), used_percent))
        return readings

    def close(self) -> None:
        """Shut NVML down if it was initialised."""
        if self._initialised:
            import pynvml

            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError as exc:
                logger.warning("NVML shutdown failed: %s", exc)
            self._initialised = False
