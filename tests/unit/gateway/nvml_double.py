"""``FakeNvml``: a test double of the ``pynvml`` module, for the GPU health reader where there is no GPU.

No machine of this project's CI has a GPU, and a GPU's faults (an uncorrectable ECC error, a lost device)
cannot be caused on demand even where one is. The double implements only the calls
:class:`gateway.gpu_health.NvmlHealthReader` makes, with pynvml's own parameter names (a test compares the
signatures with the installed nvidia-ml-py), and raises pynvml's own exception classes and uses its
constants, so the reader's error handling is exercised against the real ones. ``tests/gpu`` runs the
reader on real NVML where a GPU is present.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TypeVar

import pynvml

#: The pynvml functions the double stands in for (its methods of the same names).
FAKED_CALLS = (
    "nvmlInit",
    "nvmlShutdown",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlEventSetCreate",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
    "nvmlEventSetFree",
)


@dataclass
class FakeDevice:
    """One GPU's state. An exception instead of a value is raised by the call that reads it."""

    ecc_volatile_uncorrectable: int | Exception = 0
    ecc_aggregate_uncorrectable: int | Exception = 0
    # An Ampere-or-later GPU: row remapping instead of page retirement.
    retired_pages_pending: int | Exception = field(default_factory=pynvml.NVMLError_NotSupported)
    remapped_rows: tuple[int, int, int, int] | Exception = (0, 0, 0, 0)  # corrected, uncorrected, pending, failure
    lost: bool = False  # every call on it raises NVMLError_GpuIsLost


@dataclass(frozen=True)
class _Handle:
    index: int


@dataclass(frozen=True)
class _Event:
    device: _Handle
    eventType: int  # pynvml's c_nvmlEventData_t field names
    eventData: int


class FakeNvml:
    """Stands in for the ``pynvml`` module: pass it where the reader takes the NVML module."""

    NVMLError = pynvml.NVMLError
    NVMLError_GpuIsLost = pynvml.NVMLError_GpuIsLost
    NVMLError_ResetRequired = pynvml.NVMLError_ResetRequired
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVMLError_Timeout = pynvml.NVMLError_Timeout
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = pynvml.NVML_VOLATILE_ECC
    NVML_AGGREGATE_ECC = pynvml.NVML_AGGREGATE_ECC
    nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError

    def __init__(self, devices: list[FakeDevice] | None = None, *, init_error: Exception | None = None) -> None:
        self.devices = list(devices or [])
        self.init_error = init_error
        self.initialised = False
        self.registered: dict[int, int] = {}  # device index -> event mask
        self.events: deque[_Event] = deque()
        self.calls: list[str] = []

    # ------------------------------------------------------------ test controls
    def xid(self, index: int, code: int) -> None:
        """Queue an Xid critical-error event on a device, as the driver would."""
        if self.registered.get(index, 0) & pynvml.nvmlEventTypeXidCriticalError:
            self.events.append(_Event(_Handle(index), pynvml.nvmlEventTypeXidCriticalError, code))

    def fall_off_the_bus(self, index: int) -> None:
        """The device disappears from NVML's list (Xid 79), as a GPU that fell off the PCIe bus does."""
        del self.devices[index]

    # ------------------------------------------------------------ pynvml's calls (its camelCase names)
    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise self.init_error
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._check_init()
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        self._check_init()
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._device(_Handle(index))
        return _Handle(index)

    def nvmlDeviceGetIndex(self, handle: _Handle) -> int:
        self._device(handle)
        return handle.index

    def nvmlDeviceGetTotalEccErrors(self, handle: _Handle, errorType: int, counterType: int) -> int:
        device = self._device(handle)
        assert errorType == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, errorType
        if counterType == pynvml.NVML_VOLATILE_ECC:
            return _value(device.ecc_volatile_uncorrectable)
        assert counterType == pynvml.NVML_AGGREGATE_ECC, counterType
        return _value(device.ecc_aggregate_uncorrectable)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: _Handle) -> int:
        return _value(self._device(device).retired_pages_pending)

    def nvmlDeviceGetRemappedRows(self, device: _Handle) -> tuple[int, int, int, int]:
        return _value(self._device(device).remapped_rows)

    def nvmlEventSetCreate(self) -> object:
        self._check_init()
        return self.events

    def nvmlDeviceRegisterEvents(self, handle: _Handle, eventTypes: int, eventSet: object) -> None:
        self._device(handle)
        assert eventSet is self.events
        self.registered[handle.index] = self.registered.get(handle.index, 0) | eventTypes

    def nvmlEventSetWait_v2(self, eventSet: object, timeoutms: int) -> _Event:
        assert eventSet is self.events
        if not self.events:
            raise pynvml.NVMLError_Timeout()
        return self.events.popleft()

    def nvmlEventSetFree(self, eventSet: object) -> None:
        assert eventSet is self.events

    # ------------------------------------------------------------ helpers
    def _check_init(self) -> None:
        if not self.initialised:
            raise pynvml.NVMLError_Uninitialized()

    def _device(self, handle: _Handle) -> FakeDevice:
        self._check_init()
        if not 0 <= handle.index < len(self.devices):
            raise pynvml.NVMLError_InvalidArgument()
        device = self.devices[handle.index]
        if device.lost:
            raise pynvml.NVMLError_GpuIsLost()
        return device


_T = TypeVar("_T")


def _value(value: _T | Exception) -> _T:
    if isinstance(value, Exception):
        raise value
    return value
