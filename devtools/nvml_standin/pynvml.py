"""STAND-IN ``pynvml`` (see :mod:`devtools.nvml_standin`): one healthy GPU, or the fault the state file names.

Only the calls the gateway makes (``gateway.cuda_check``, ``gateway.gpu_health``, ``gateway.metrics.gpu``) are
here; the exception classes and constants are the installed nvidia-ml-py's own, so the gateway's error handling
meets the real ones. Xid events, utilization and memory are ``NVMLError_NotSupported`` (as NVML answers on GPUs
without them): a figure made up here would be a made-up datapoint in the gateway's EMF.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)


def _real_pynvml() -> Any:
    """The installed nvidia-ml-py, found on the path past this folder and loaded under another name."""
    for entry in sys.path:
        if entry and str(Path(entry).resolve()) == _HERE:
            continue
        found = importlib.machinery.PathFinder.find_spec("pynvml", [entry or "."])
        if found is None or found.origin is None:
            continue
        # Its own name: nvidia-ml-py adds its error classes to sys.modules[__name__] as it loads.
        spec = importlib.util.spec_from_file_location("_nvml_installed", found.origin)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    raise ImportError("the NVML stand-in needs nvidia-ml-py installed for its exception classes and constants")


_real = _real_pynvml()
NVMLError = _real.NVMLError
NVMLError_NotSupported = _real.NVMLError_NotSupported
NVMLError_GpuIsLost = _real.NVMLError_GpuIsLost
NVMLError_ResetRequired = _real.NVMLError_ResetRequired
NVMLError_Timeout = _real.NVMLError_Timeout
NVMLError_InvalidArgument = _real.NVMLError_InvalidArgument
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = _real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
NVML_VOLATILE_ECC = _real.NVML_VOLATILE_ECC
NVML_AGGREGATE_ECC = _real.NVML_AGGREGATE_ECC
NVML_BRAND_NVIDIA = _real.NVML_BRAND_NVIDIA  # a data-center part
nvmlEventTypeXidCriticalError = _real.nvmlEventTypeXidCriticalError

#: An H100 instance's driver (CUDA 12.4), above any image CUDA this project builds on.
CUDA_DRIVER_VERSION = 12040


def _fault() -> dict[str, Any]:
    path = os.environ.get("NVML_STANDIN_STATE")
    if not path or not Path(path).exists():
        return {}
    state: dict[str, Any] = json.loads(Path(path).read_text())
    return dict(state.get(os.environ.get("VARIANT_NAME", ""), {}))


def _device(handle: int) -> int:
    if handle != 0:
        raise NVMLError_InvalidArgument()
    return handle


def nvmlInit() -> None:
    return None


def nvmlShutdown() -> None:
    return None


def nvmlSystemGetCudaDriverVersion() -> int:
    return CUDA_DRIVER_VERSION


def nvmlDeviceGetCount() -> int:
    return 1


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    return _device(index)


def nvmlDeviceGetIndex(handle: int) -> int:
    return _device(handle)


def nvmlDeviceGetBrand(handle: int) -> int:
    _device(handle)
    return int(NVML_BRAND_NVIDIA)


def nvmlDeviceGetTotalEccErrors(handle: int, errorType: int, counterType: int) -> int:
    _device(handle)
    if errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
        raise NVMLError_InvalidArgument()
    return int(_fault().get("ecc_volatile_uncorrectable", 0)) if counterType == NVML_VOLATILE_ECC else 0


def nvmlDeviceGetRetiredPagesPendingStatus(device: int) -> int:
    _device(device)
    raise NVMLError_NotSupported()  # Ampere and later remap rows instead


def nvmlDeviceGetRemappedRows(device: int) -> tuple[int, int, int, int]:
    _device(device)
    return (0, 0, 0, 0)  # corrected, uncorrected, pending, failure


def nvmlEventSetCreate() -> Any:
    raise NVMLError_NotSupported()


def nvmlDeviceGetUtilizationRates(handle: int) -> Any:
    _device(handle)
    raise NVMLError_NotSupported()  # no figure to give: a made-up utilization would be a made-up datapoint


def nvmlDeviceGetMemoryInfo(handle: int) -> Any:
    _device(handle)
    raise NVMLError_NotSupported()
