"""Demo part 2, the main story: the control plane drives the real container on one local system.

The endpoint ``manga-chat`` serves v1 from the project's container (gateway + a real CPU vLLM engine with the
tiny model). Then, with users asking all along:

1. v2 ships with one more LoRA adapter: canary at 50 %, analysed on what its gateway emitted, promoted.
2. v3 ships with an export that lost the Japanese tokens. The bake sees English traffic and passes; the rollout
   waits for a person to approve its promotion, users at 50 %; Japanese readers arrive, the canary's engine dies
   on their prompts, the gateway answers with its fallback, the canary's alarms breach, and the alarm responder's
   rollback takes the rollout's lease, aborts it and puts the canary at weight 0.
3. The Friday spike, played for real: a burst queues in vLLM on the small primary; the queue-depth alarm fires
   and the responder raises MinCapacity.

Every metric comes from the gateways' EMF lines, every alarm from the templates, every decision from the real
handlers and state machines (see devtools/local_system.py). Alarm periods and the gateways' metrics interval run
20 times faster than on AWS; the delays are shown in wall-clock seconds and in the AWS seconds they stand for.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from demo.expect import expect
from devtools.emulator import MotoServer
from devtools.endpoint_sampler import canary_when_users_moved
from devtools.local_system import CANARY, PRIMARY, Answer, LocalSystem, aws_equivalent_s, local_system
from devtools.scenarios import broken_canary, healthy_rollout, queue_build_up
from devtools.tiny_model import ensure_tiny_model

REPO = Path(__file__).resolve().parents[1]


def _say(text: str) -> None:
    print(text, flush=True)


def _seconds(total_s: float | None, before_alarm_s: float | None) -> str:
    """``6.2 s (about 83 s on AWS)``: wall-clock, and AWS seconds with the part up to the alarm's event scaled."""
    if total_s is None or before_alarm_s is None:
        return f"{total_s} s"
    return f"{total_s:.1f} s (about {aws_equivalent_s(before_alarm_s, total_s - before_alarm_s):.0f} s on AWS)"


def _served(answers: list[Answer]) -> str:
    """``primary/v1 x12, canary/v2 x11`` (fallbacks and errors counted apart)."""
    kinds = Counter(
        f"{a.variant}/{a.version}" if a.controlled and not a.fallback else ("fallback" if a.fallback else a.error[:40])
        for a in answers
    )
    return ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common())


def _new_adapter(system: LocalSystem) -> None:
    _say("\n--- 1. v2 with a new adapter (seasonal_promo): canary, analysis on real traffic, approval, promotion")
    outcome = healthy_rollout(system, adapter="seasonal_promo")
    _say(f"rollout: {outcome.execution['status']}")
    expect(outcome.execution["status"] == "SUCCEEDED", "v2 with a new adapter is promoted")
    moved = ", ".join(f"{share:g} % on {count}" for share, count in canary_when_users_moved(outcome.samples))
    _say(f"canary sized before users moved, beside a primary of {outcome.primary_before} instances: {moved}")
    waiting = max(s.canary_share() for s in outcome.at_approval)
    _say(f"while the 50 % step waited for approval, users were at {waiting:g} %")
    _say(f"answers during the canary: {_served(outcome.during_canary)}")
    promo = outcome.on_canary[-1]
    words = promo.body["choices"][0]["message"]["content"][:50]  # the tiny model's weights are random: so are its words
    _say(f"the canary with adapter seasonal_promo: {promo.body['backend']} -> {words!r}")
    refused = outcome.on_primary_with_new_adapter
    if refused is not None:
        _say(f"the v1 primary asked for it: HTTP {refused.status}: {refused.error[:120]}")
    _say(f"after promotion: {_served(outcome.after)}")


def _broken_canary(system: LocalSystem) -> None:
    _say("\n--- 2. v3 with a broken export, rolled back by its own alarms while the rollout holds the lease")
    outcome = broken_canary(system, rollout_id="v3-broken")
    _say(f"lease holder when Japanese readers arrived: {outcome.lease_holder_before}")
    _say(f"answers: {_served(outcome.answers)}")
    took = _seconds(outcome.detect_to_weight0_s, outcome.detect_to_alarm_s)
    _say(f"first fallback on the canary -> canary weight 0: {took}")
    _say(f"rollout: {outcome.rollout['status']}; endpoint config now {outcome.config_after}")
    _say(f"weights: {outcome.weights_after}")
    expect(outcome.rollout["status"] == "ABORTED", "the broken v3's rollout is aborted by the rollback")
    expect(not outcome.weights_after.get(CANARY), "the broken v3's canary ends at weight 0")
    for rollback in outcome.rollbacks:
        ending = "joined the rollback at work" if "AlreadyRollingBack" in rollback["states"] else "did the work"
        _say(f"rollback {rollback['name']}: {rollback['status']} ({ending})")


def _burst(system: LocalSystem) -> None:
    _say("\n--- 3. the Friday spike on the small primary: queue-depth alarm -> MinCapacity raised")
    _say("(first, if the earlier traffic already made the responder scale out, its 5-minute cooldown runs out)")
    outcome = queue_build_up(system)
    raised = f"{outcome.min_capacity_before} -> {outcome.min_capacity_after}"
    expect(outcome.min_capacity_after > outcome.min_capacity_before, "the queue-depth alarm raises MinCapacity")
    _say(f"MinCapacity {raised}, {_seconds(outcome.load_to_capacity_s, outcome.load_to_alarm_s)} after the burst began")
    _say(f"the primary then serves on {outcome.instances_after} instances (DescribeEndpoint: Application Auto Scaling "
         "brought it up to the new MinCapacity)")  # fmt: skip
    _say(f"answers: {sum(a.controlled for a in outcome.answers)} answered, "
         f"{sum(a.deadline_exceeded for a in outcome.answers)} cut at the gateway's deadline (504): "
         "one sequence at a time cannot serve this burst, hence the scale-out")  # fmt: skip


def run(emulator: MotoServer) -> None:
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    with tempfile.TemporaryDirectory() as tmp:
        _say("starting the local system: the emulated account, the workflows, the alarms and the v1 container ...")
        with local_system(Path(tmp) / "system", tiny, max_num_seqs=1) as system:
            first = system.invoke("When is the next One Piece volume out?")
            _say(f"{PRIMARY} answers: {first.body['backend']} (canary variant '{CANARY}' not deployed yet)")
            _new_adapter(system)
            _broken_canary(system)
            _burst(system)
