"""The closed loop on the local system: real load and a real broken canary in, control-plane actions out.

- ``alarm_to_capacity_s``: real load on the primary starts -> its MinCapacity raised (queue-depth alarm on what
  the gateway emitted, the template's alarm, the real responder). Alarm time runs ``time_scale`` times faster
  than on AWS (a 60 s period is evaluated over 60/``time_scale`` s), so this measures the system's own delays
  (metrics interval, log shipping, evaluation, responder) plus one compressed alarm period; on AWS add the
  real period (60 s) and CloudWatch's own delay.
- ``canary_detect_to_weight0_s``: the broken canary's first failed answer (fallback) -> canary weight 0.
- ``controlled_answer_ratio``: share of the answers users got while the broken canary served that were a normal
  answer or the documented fallback (target 1.0).

Runs the same scenarios as ``tests/integration/local_system/test_one_system.py`` (devtools.scenarios), once each
(each starts real CPU engines; a run takes several minutes).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from devtools.emulator import moto_server
from devtools.local_system import TIME_SCALE, local_system
from devtools.scenarios import broken_canary, queue_build_up
from devtools.tiny_model import ensure_tiny_model

REPO = Path(__file__).resolve().parents[1]


def run() -> dict[str, float]:
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    results: dict[str, float] = {"time_scale": TIME_SCALE}
    with moto_server() as emulator, tempfile.TemporaryDirectory() as tmp:
        with local_system(Path(tmp) / "queue", tiny, max_num_seqs=1) as system:  # a small primary, as in the test
            queue = queue_build_up(system)
        results["alarm_to_capacity_s"] = round(queue.load_to_capacity_s, 2)
        results["min_capacity_raised_by"] = queue.min_capacity_after - queue.min_capacity_before
        emulator.reset()
        with local_system(Path(tmp) / "canary", tiny) as system:
            canary = broken_canary(system)
        results["canary_detect_to_weight0_s"] = round(canary.detect_to_weight0_s or -1.0, 2)
        results["controlled_answer_ratio"] = round(
            sum(a.controlled for a in canary.answers) / max(1, len(canary.answers)), 4
        )
        results["answers_during_broken_canary"] = len(canary.answers)
    return results
