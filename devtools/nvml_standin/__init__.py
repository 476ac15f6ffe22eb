"""STAND-IN for NVML in the local system's containers: this machine has no GPU, and a GPU fault cannot be caused.

The folder is put first on a container's ``PYTHONPATH`` (:func:`container_env`), so the gateway's ``import pynvml``
finds :mod:`devtools.nvml_standin.pynvml`: one healthy data-center GPU, until a test writes a fault for the
container's variant into the state file (:func:`break_gpu`). The gateway's real ``NvmlHealthReader`` and
``GpuHealthMonitor`` read it as they read NVML on an instance, and emit ``GpuHealthy`` in their EMF. vLLM does not
import this module (it ships its own copy of pynvml, and on a CPU its platform is CPU whatever NVML says).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from devtools.local_serving import PYTHONPATH

FOLDER = Path(__file__).resolve().parent
#: The variable naming the state file: ``{variant: {"ecc_volatile_uncorrectable": n}}``; absent: healthy.
STATE_VARIABLE = "NVML_STANDIN_STATE"


def container_env(state_file: Path) -> dict[str, str]:
    """Variables that make a container's gateway read the stand-in (a local SageMaker's ``host_env``)."""
    return {"PYTHONPATH": os.pathsep.join([str(FOLDER), PYTHONPATH]), STATE_VARIABLE: str(state_file)}


def break_gpu(state_file: Path, variant: str, uncorrectable_ecc_errors: int = 1) -> None:
    """Give ``variant``'s GPU ``uncorrectable_ecc_errors`` volatile uncorrectable ECC errors (the next check sees
    them), as a GPU whose memory failed reports them."""
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    state[variant] = {"ecc_volatile_uncorrectable": uncorrectable_ecc_errors}
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(state_file)  # atomic: a check never reads half a file
