"""The closed loop on the local system: real load and a real broken canary in, control-plane actions out.

Time is compressed once, by ``time_scale`` (20): the alarms' periods and evaluation (a 60 s period is a 3 s
window) and the gateways' metrics interval (``metrics_interval_wall_s``, 3 s for the image's 60 s) alike. What
the control plane does once an alarm's event is out (the responder, the rollback workflow, the SageMaker calls)
runs at the clock's speed. So every delay is given twice, side by side:

- ``*_wall_s``: wall-clock seconds on this machine, as measured (compressed time up to the alarm's event);
- ``*_aws_equiv_s``: the same span in AWS seconds, the part up to the alarm's event times ``time_scale`` plus the
  rest as measured (:func:`devtools.local_system.aws_equivalent_s`). It scales the few real seconds before the
  event too (log shipping, a queue forming), so it errs long, and leaves out CloudWatch's own ingestion delay.

The spans:

- ``alarm_to_capacity_*``: real load on the primary starts -> its MinCapacity raised (the template's queue-depth
  alarm on what the gateway emitted, the real responder).
- ``canary_detect_to_weight0_*``: the broken canary's first failed answer (fallback) -> canary weight 0 (the first
  of the canary's alarms, the responder and the rollback workflow).
- ``*_before_alarm_wall_s`` / ``*_after_alarm_wall_s``: each span's wall-clock seconds up to the alarm's event
  reaching the responder (compressed) and from there on (not).
- ``controlled_answer_ratio``: share of the answers users got while the broken canary served that were a normal
  answer or the documented fallback (target 1.0).

Runs the same scenarios as ``tests/integration/local_system/test_one_system.py`` (devtools.scenarios), once each
(each starts real CPU engines; a run takes several minutes).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from devtools.emulator import moto_server
from devtools.local_system import IMAGE_METRICS_INTERVAL_S, TIME_SCALE, aws_equivalent_s, local_system
from devtools.scenarios import broken_canary, queue_build_up
from devtools.tiny_model import ensure_tiny_model

REPO = Path(__file__).resolve().parents[1]


def side_by_side(name: str, total_s: float | None, emulated_s: float | None) -> dict[str, float]:
    """``name``'s wall-clock and AWS-equivalent seconds, and the wall-clock parts before and after the alarm's event.

    -1 where the span was not seen (the scenario's own assertions say why).

    Examples
    --------
    >>> side_by_side("x", 5.0, 4.0) == {
    ...     "x_wall_s": 5.0, "x_aws_equiv_s": 81.0, "x_before_alarm_wall_s": 4.0, "x_after_alarm_wall_s": 1.0
    ... }
    True
    """
    if total_s is None or emulated_s is None:
        return {f"{name}_wall_s": -1.0, f"{name}_aws_equiv_s": -1.0}
    return {
        f"{name}_wall_s": round(total_s, 2),
        f"{name}_aws_equiv_s": round(aws_equivalent_s(emulated_s, total_s - emulated_s, TIME_SCALE), 1),
        f"{name}_before_alarm_wall_s": round(emulated_s, 2),
        f"{name}_after_alarm_wall_s": round(total_s - emulated_s, 2),
    }


def run() -> dict[str, float]:
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    results: dict[str, float] = {
        "time_scale": TIME_SCALE,
        "metrics_interval_wall_s": IMAGE_METRICS_INTERVAL_S / TIME_SCALE,
        "alarm_period_wall_s": 60 / TIME_SCALE,
    }
    with moto_server() as emulator, tempfile.TemporaryDirectory() as tmp:
        with local_system(Path(tmp) / "queue", tiny, max_num_seqs=1) as system:  # a small primary, as in the test
            queue = queue_build_up(system)
        results |= side_by_side("alarm_to_capacity", queue.load_to_capacity_s, queue.load_to_alarm_s)
        results["min_capacity_raised_by"] = queue.min_capacity_after - queue.min_capacity_before
        emulator.reset()
        with local_system(Path(tmp) / "canary", tiny) as system:
            canary = broken_canary(system)
        results |= side_by_side("canary_detect_to_weight0", canary.detect_to_weight0_s, canary.detect_to_alarm_s)
        results["controlled_answer_ratio"] = round(
            sum(a.controlled for a in canary.answers) / max(1, len(canary.answers)), 4
        )
        results["answers_during_broken_canary"] = len(canary.answers)
    return results
