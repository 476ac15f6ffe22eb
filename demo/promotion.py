"""Demo part 3 (after one_system), model promotion: the pre-traffic gates refuse bad candidates.

The stack's environment runs the pre-traffic gates (fleet.yaml ``rollout_policy: pre_traffic_gates``). With
users asking all along, three candidates ship:

1. one whose ``tokenizer.json`` was cut off halfway: the artifact gate refuses it before anything is created;
2. one whose adapters were trained on store text: the canary starts at weight 0, answers the load test, fails
   the evaluation suite and is rolled back; its own gateway counted only the gate's requests;
3. one whose adapters were trained on the suite's answers: it passes both gates, bakes and is promoted;
4. the same, shadowed first: live requests captured at weight 0 are replayed to it and compared.

The adapters are real LoRA adapters trained on the CPU in seconds (devtools/eval_adapters.py); the suite is the
shipped ``fleet_config/eval_suite.yaml``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import boto3

from demo.expect import expect
from devtools.emulator import MotoServer
from devtools.local_system import local_system
from devtools.promotion_scenarios import LOCAL_SHADOW, PromotionOutcome, candidate_artifact, promote
from devtools.tiny_model import ensure_tiny_model

REPO = Path(__file__).resolve().parents[1]


def _say(text: str) -> None:
    print(text, flush=True)


def _rollbacks() -> list[str]:
    """Every rollback execution so far: who stopped a rollout, and why (printed when a rollout ends unexpectedly)."""
    sfn = boto3.client("stepfunctions")
    machines = sfn.list_state_machines()["stateMachines"]
    lines = []
    for machine in (m for m in machines if "rollback" in m["name"].lower()):
        for listed in sfn.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"]:
            execution = sfn.describe_execution(executionArn=listed["executionArn"])
            lines.append(f"  rollback {listed['name']}: {execution['status']}, input {execution['input'][:300]}")
    return lines


def _report(outcome: PromotionOutcome, expected: tuple[str, str | None]) -> None:
    status = outcome.execution["status"]
    ended = (status, outcome.execution.get("error") if status != "SUCCEEDED" else None)
    expect(ended == expected, f"rollout {outcome.execution['name']} ends {expected}, not {ended}")
    if ended != expected:
        _say("\n".join(_rollbacks()))
    _say(f"rollout: {status}" + (f" ({outcome.execution.get('error')})" if status != "SUCCEEDED" else ""))
    if status != "SUCCEEDED":
        _say(f"cause: {outcome.execution.get('cause', '')[:300]}")
    gate = outcome.candidate_gate
    if gate is not None:
        _say(f"candidate gate: {gate['summary'][:300]}")
        counted = f"requests the candidate's gateway counted: {outcome.candidate_requests:.0f}, the gate sent "
        if "SetWeights" in outcome.states:  # users were routed to it from the first step on, as they should
            _say(counted + f"{outcome.gate_requests}; users reached it from its first step on")
        else:
            _say(counted + f"{outcome.gate_requests} -> user requests that reached it: "
                 f"{outcome.user_requests_to_candidate:.0f}")  # fmt: skip
    users = {a.variant for a in outcome.users}
    _say(f"users answered: {len(outcome.users)}, by {sorted(users)}; gates took {outcome.gate_seconds:.1f} s")


def run(emulator: MotoServer) -> None:
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    with tempfile.TemporaryDirectory() as tmp:
        _say("starting the local system with the pre-traffic gates on ...")
        with local_system(Path(tmp) / "gated", tiny, pre_traffic_gates=True) as system:
            _say("\n--- 1. a candidate whose tokenizer.json was cut off halfway")
            refused = promote(system, "v2-tokenizer", system.artifact("v2-tokenizer", broken="tokenizer"))
            _report(refused, ("FAILED", "ArtifactRefusedError"))
            _say("\n--- 2. a candidate whose adapters were trained on other text")
            _report(promote(system, "v2-bad", candidate_artifact(system, "v2-bad", "bad")), ("FAILED", "RolledBack"))
            _say("\n--- 3. a candidate whose adapters answer the evaluation suite")
            _report(promote(system, "v2-good", candidate_artifact(system, "v2-good", "good")), ("SUCCEEDED", None))
            _say("\n--- 4. the same candidate with the shadow option: live requests replayed to it at weight 0")
            url = candidate_artifact(system, "v3-shadow", "good")
            shadowed = promote(system, "v3-shadow", url, shadow=LOCAL_SHADOW)
            _report(shadowed, ("SUCCEEDED", None))
            _say(f"the rollout's output says: {shadowed.output.get('shadow_comparison', {}).get('summary')}")
