"""Cold import time of a Lambda handler module vs a bare Powertools handler, in fresh interpreters.

Each sample is a new ``python`` process that imports the module the way Lambda does at a cold start
(with the function's environment set), timed inside the process around the import alone. Samples of
the two modules are interleaved (A B A B ...) so that machine noise hits both alike; the ratio is the median
of the pairs' ratios.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
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
spec = importlib.util.spec_from_file_location("app", path)
module = importlib.util.module_from_spec(spec)
sys.modules["app"] = module  # as `import app` (Lambda's handler "app.lambda_handler") registers it
spec.loader.exec_module(module)
print(time.perf_counter() - start)
"""


def _sample(path: Path, env: dict[str, str], python: str) -> float:
    probe = [python, "-c", _PROBE, str(path)]
    out = subprocess.run(probe, check=False, env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"importing {path} failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def import_ratio(
    handler: Path,
    env: dict[str, str],
    repeats: int = 15,
    *,
    python: str = sys.executable,
    path: Sequence[Path] = (REPO / "layers/core", REPO),
) -> dict[str, float]:
    """Median cold import seconds of ``handler`` and of a bare Powertools handler, and their ratio.

    ``python`` runs the samples with ``path`` as its PYTHONPATH (by default this checkout's layer source).
    """
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(p) for p in path),
        "POWERTOOLS_SERVICE_NAME": "bench",
        "POWERTOOLS_METRICS_NAMESPACE": "bench",
        **env,
    }
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare_app.py"
        bare.write_text(BARE_HANDLER)
        # One unmeasured sample of each first: the files in the OS's cache (and, where ``env`` lets Python write
        # bytecode, the caches written), as in a warm execution environment's disk.
        _sample(handler, full_env, python)
        _sample(bare, full_env, python)
        ours, base = [], []
        for _ in range(repeats):
            ours.append(_sample(handler, full_env, python))
            base.append(_sample(bare, full_env, python))
    handler_ms = statistics.median(ours) * 1000
    bare_ms = statistics.median(base) * 1000
    return {
        "handler_import_ms": round(handler_ms, 2),
        "bare_powertools_import_ms": round(bare_ms, 2),
        # The median of each back-to-back pair's ratio, not the ratio of the medians: a pair shares the machine's
        # load of its moment, so a busy spell on this shared machine moves both of its samples alike.
        "handler_import_ratio": round(statistics.median(o / b for o, b in zip(ours, base, strict=True)), 3),
        "samples": float(repeats),
    }
