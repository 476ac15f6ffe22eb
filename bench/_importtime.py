"""Cold import time of a Lambda handler module vs a bare Powertools handler, in fresh interpreters.

Each sample is a new ``python`` process that imports the module the way Lambda does at a cold start
(with the function's environment set), timed inside the process around the import alone. Samples of
the two modules are interleaved (A B A B ...) so that machine noise hits both alike; the ratio is of
the medians.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BARE_HANDLER = """
from aws_lambda_powertools import Logger, Metrics, Tracer
logger = Logger()
metrics = Metrics()
tracer = Tracer()

@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event, context):
    return {"ok": True}
"""

_PROBE = """
import importlib.util, sys, time
path = sys.argv[1]
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("handler_under_test", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(time.perf_counter() - start)
"""


def _sample(path: Path, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)], env=env, capture_output=True, text=True, check=True, timeout=120
    )
    return float(out.stdout.strip().splitlines()[-1])


def import_ratio(handler: Path, env: dict[str, str], repeats: int = 15) -> dict[str, float]:
    """Median cold import seconds of ``handler`` and of a bare Powertools handler, and their ratio."""
    full_env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'layers/core'}{os.pathsep}{REPO}",
        "POWERTOOLS_SERVICE_NAME": "bench",
        "POWERTOOLS_METRICS_NAMESPACE": "bench",
        "PYTHONDONTWRITEBYTECODE": "0",
        **env,
    }
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare_app.py"
        bare.write_text(BARE_HANDLER)
        _sample(handler, full_env)  # warm the bytecode caches of both, as a deployed package has them
        _sample(bare, full_env)
        ours, base = [], []
        for _ in range(repeats):
            ours.append(_sample(handler, full_env))
            base.append(_sample(bare, full_env))
    handler_ms = statistics.median(ours) * 1000
    bare_ms = statistics.median(base) * 1000
    return {
        "handler_import_ms": round(handler_ms, 2),
        "bare_powertools_import_ms": round(bare_ms, 2),
        "handler_import_ratio": round(handler_ms / bare_ms, 3),
        "samples": float(repeats),
    }
