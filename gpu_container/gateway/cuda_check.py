"""Does the host's NVIDIA driver run this image's CUDA? Decided once, before the engine is started.

SageMaker runs driver 470 (CUDA 11.4) unless the endpoint config's ``InferenceAmiVersion`` names a newer AMI
(``fleetops.model_contract.INFERENCE_AMIS``; fleet.yaml's ``hosting``). An engine built for a newer CUDA then
fails deep in its start with "CUDA driver version is insufficient", and SageMaker only sees a health check time
out. Three parts, as in :mod:`gateway.gpu_health`: :func:`decide`, pure (versions in, a decision out);
:func:`read_driver`, a thin reader over a ``pynvml``-shaped module given from outside; :func:`at_start`, which
the entrypoint calls and which applies the decision to the process environment the engine inherits.

The decision, for a driver older than the image's CUDA: with CUDA forward-compatibility libraries in the image
(``/usr/local/cuda/compat``, as the ``nvidia/cuda`` base images ship them) on a data-center GPU (forward
compatibility is not supported on GeForce or Titan cards), and a driver at most one major version behind (the
compat packages support the previous major's long-term driver branches), the compat folder goes first on
``LD_LIBRARY_PATH``, as AWS's own inference containers do at start (the ``-1`` AMIs no longer mount it). A
driver of the same major version and no compat libraries still runs the image (CUDA minor-version
compatibility: the engine's kernels are built for the GPU). Otherwise the container exits 1 naming the
``InferenceAmiVersion`` to choose.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from fleetops.model_contract import DEFAULT_AMI_CUDA, ami_for_cuda

logger = logging.getLogger(__name__)

#: Where the ``nvidia/cuda`` base images (under vLLM's image) put the forward-compatibility driver libraries.
COMPAT_DIR = Path("/usr/local/cuda/compat")
#: The image's CUDA toolkit version, set by the ``nvidia/cuda`` base image (e.g. ``12.9.1``).
IMAGE_CUDA_VARIABLE = "CUDA_VERSION"
#: NVML brands of consumer cards, on which CUDA forward compatibility is not supported.
CONSUMER_BRANDS = ("NVML_BRAND_GEFORCE", "NVML_BRAND_TITAN", "NVML_BRAND_GEFORCE_RTX", "NVML_BRAND_TITAN_RTX")

Version = tuple[int, int]


class Outcome(StrEnum):
    START = "start"  # the driver runs the image's CUDA (or nothing to check: no GPU, no version known)
    COMPAT = "compat"  # start with the forward-compatibility libraries first on LD_LIBRARY_PATH
    REFUSE = "refuse"  # exit 1: no engine can start on this driver


@dataclass(frozen=True)
class Driver:
    """What NVML says. ``cuda`` None: no NVML or no driver (a CPU machine)."""

    cuda: Version | None
    datacenter: bool = True  # every GPU supports forward compatibility (no GeForce/Titan among them)


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    message: str


def parse_version(text: str | None) -> Version | None:
    """``12.9.1`` -> ``(12, 9)``; ``None`` for anything else.

    Examples
    --------
    >>> parse_version("12.9.1"), parse_version("13.0"), parse_version(""), parse_version(None)
    ((12, 9), (13, 0), None, None)
    """
    match = re.match(r"^\s*(\d+)\.(\d+)", text or "")
    return (int(match[1]), int(match[2])) if match else None


def nvml_version(value: int) -> Version:
    """NVML's CUDA driver version (``1000 * major + 10 * minor``) as ``(major, minor)``.

    Examples
    --------
    >>> nvml_version(12040), nvml_version(11040)
    ((12, 4), (11, 4))
    """
    return value // 1000, (value % 1000) // 10


def _text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def decide(image: Version | None, driver: Driver, compat_present: bool) -> Decision:
    """Start, start with the compat libraries, or refuse.

    Examples
    --------
    >>> decide((12, 4), Driver(cuda=(12, 8)), compat_present=False).outcome
    <Outcome.START: 'start'>
    >>> decide((12, 4), Driver(cuda=(11, 4)), compat_present=True).outcome
    <Outcome.COMPAT: 'compat'>
    >>> print(decide((12, 4), Driver(cuda=(11, 4)), compat_present=False).message)  # doctest: +ELLIPSIS
    the NVIDIA driver runs CUDA 11.4 (SageMaker's default AMI), the image needs CUDA 12.4 ... InferenceAmiVersion ...
    """
    if driver.cuda is None:
        return Decision(Outcome.START, "CUDA not checked: no NVIDIA driver answers NVML (no GPU here)")
    if image is None:
        return Decision(Outcome.START, f"CUDA not checked: {IMAGE_CUDA_VARIABLE} does not name the image's CUDA")
    have, need = _text(driver.cuda), _text(image)
    if driver.cuda >= image:
        return Decision(Outcome.START, f"the NVIDIA driver runs CUDA {have}; the image needs {need}")
    why_not = []
    if not compat_present:
        why_not.append(f"the image has no forward-compatibility libraries in {COMPAT_DIR}")
    if not driver.datacenter:
        why_not.append("a GeForce or Titan GPU does not support forward compatibility")
    if driver.cuda[0] < image[0] - 1:
        why_not.append(f"forward compatibility reaches one major version back, not from CUDA {have}")
    if not why_not:
        return Decision(
            Outcome.COMPAT,
            f"the NVIDIA driver runs CUDA {have}, older than the image's {need}: starting with the "
            f"forward-compatibility libraries of {COMPAT_DIR} first on LD_LIBRARY_PATH",
        )
    if driver.cuda[0] == image[0]:
        return Decision(
            Outcome.START,
            f"the NVIDIA driver runs CUDA {have}, older than the image's {need}: starting under CUDA "
            f"minor-version compatibility ({'; '.join(why_not)})",
        )
    return Decision(Outcome.REFUSE, _refusal(have, need, driver.cuda, image, why_not))


def _refusal(have: str, need: str, driver: Version, image: Version, why_not: list[str]) -> str:
    default = " (SageMaker's default AMI)" if driver == DEFAULT_AMI_CUDA else ""
    ami = ami_for_cuda(image)
    choose = (
        f"choose InferenceAmiVersion {ami.name} (driver {ami.driver}, CUDA {_text(ami.cuda)}) in fleet.yaml's "
        "hosting for this endpoint and create its endpoint config again"
        if ami
        else "no InferenceAmiVersion SageMaker documents runs it: build the image on an older CUDA"
    )
    return f"the NVIDIA driver runs CUDA {have}{default}, the image needs CUDA {need} ({'; '.join(why_not)}): {choose}"


def read_driver(nvml: Any) -> Driver:
    """The driver's CUDA version and whether every GPU is a data-center part, through ``nvml`` (never raises)."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return Driver(cuda=None)
    try:
        cuda = nvml_version(int(nvml.nvmlSystemGetCudaDriverVersion()))
        consumer = {getattr(nvml, name) for name in CONSUMER_BRANDS if hasattr(nvml, name)}
        brands = [nvml.nvmlDeviceGetBrand(nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())]
        return Driver(cuda=cuda, datacenter=not any(brand in consumer for brand in brands))
    except nvml.NVMLError as exc:
        logger.warning("CUDA not checked: NVML failed (%s: %s)", type(exc).__name__, exc)
        return Driver(cuda=None)
    finally:
        nvml.nvmlShutdown()


def at_start(environ: MutableMapping[str, str], nvml: Any | None, compat_dir: Path | None = None) -> Decision:
    """Decide from the environment and NVML (``None``: pynvml not installed), log it, and on ``COMPAT`` put
    ``compat_dir`` first on ``environ``'s ``LD_LIBRARY_PATH``, which the engine's process inherits."""
    compat_dir = compat_dir or COMPAT_DIR
    driver = read_driver(nvml) if nvml is not None else Driver(cuda=None)
    decision = decide(image_cuda(environ), driver, (compat_dir / "libcuda.so.1").exists())
    if decision.outcome is Outcome.COMPAT:
        current = environ.get("LD_LIBRARY_PATH", "")
        environ["LD_LIBRARY_PATH"] = f"{compat_dir}:{current}" if current else str(compat_dir)
    if decision.outcome is not Outcome.REFUSE:
        logger.info("%s", decision.message, extra={"event": "cuda_check", "outcome": str(decision.outcome)})
    return decision


def image_cuda(environ: Mapping[str, str]) -> Version | None:
    return parse_version(environ.get(IMAGE_CUDA_VARIABLE))
