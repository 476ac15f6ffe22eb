"""The local system's NVML stand-in (``devtools/nvml_standin``), read by the gateway's real GPU code.

A container finds it as ``pynvml`` through its ``PYTHONPATH``; here a subprocess gets the same variables and
runs the gateway's CUDA check, health reader and verdict on it, before and after a fault is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from devtools.nvml_standin import break_gpu, container_env

PROBE = """
import json, sys
import pynvml
from gateway.config import GpuHealthConfig
from gateway.cuda_check import read_driver
from gateway.gpu_health import NvmlHealthReader, assess
from gateway.metrics.gpu import NvmlGpuReader
reader = NvmlHealthReader(pynvml)
verdict = assess(reader.read(), GpuHealthConfig())
print(json.dumps({"module": pynvml.__file__, "cuda": read_driver(pynvml).cuda, "health": str(verdict.health),
                  "reason": verdict.reason, "utilization": len(NvmlGpuReader().read())}))
"""


def _probe(state: Path, variant: str) -> dict[str, object]:
    env = {**os.environ, **container_env(state), "VARIANT_NAME": variant}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_gateway_reads_a_healthy_gpu_until_a_fault_is_written_for_its_variant(tmp_path: Path) -> None:
    state = tmp_path / "state.json"

    healthy = _probe(state, "primary")
    break_gpu(state, "primary")
    broken, other = _probe(state, "primary"), _probe(state, "canary")

    assert str(healthy["module"]).endswith("devtools/nvml_standin/pynvml.py"), healthy
    assert healthy["cuda"] == [12, 4] and healthy["health"] == "healthy", healthy
    assert healthy["utilization"] == 0, healthy  # no made-up utilization: the metrics agent leaves the GPU out
    assert broken["health"] == "unhealthy", broken
    assert broken["reason"] == "GPU 0: 1 uncorrectable ECC errors since the driver loaded (limit 0)", broken
    assert other["health"] == "healthy", other  # another variant's instance keeps its GPU
