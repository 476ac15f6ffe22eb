"""Model promotion on the local system: candidates meet the pre-traffic gates while users keep asking.

Shared by the tests (which assert) and ``bench/promotion.py`` (which records the figures). Every number comes
from the real workflow's history and what the real gateways emitted: how many requests the candidate's own
gateway counted, against how many the candidate gate says it sent, is how many user requests reached it.
Run on ``local_system(pre_traffic_gates=True)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from devtools import rollout_workflow as wf
from devtools.eval_adapters import ensure_eval_adapters, suite_adapters
from devtools.local_system import CANARY, PRIMARY, Answer, LocalSystem, emitted, traffic, wait_for
from devtools.scenarios import english
from devtools.state_machines import state_history, state_visits
from fleetops.metrics import MetricName


@dataclass
class PromotionOutcome:
    """One candidate's rollout, as the workflow, the users and the candidate's gateway saw it."""

    execution: dict[str, Any]
    states: list[str]
    users: list[Answer] = field(default_factory=list)
    artifact_gate_s: float | None = None
    candidate_gate_s: float | None = None
    #: What the candidate gate reports (its verdict, sent requests), when it finished.
    candidate_gate: dict[str, Any] | None = None
    #: Requests the candidate's own gateway counted (its EMF ``Requests``, read back from CloudWatch).
    candidate_requests: float = 0.0

    @property
    def output(self) -> dict[str, Any]:
        """The rollout's output (its summary of a successful run: the plan and every gate's result)."""
        return dict(json.loads(self.execution.get("output") or "{}"))

    @property
    def gate_seconds(self) -> float:
        return (self.artifact_gate_s or 0.0) + (self.candidate_gate_s or 0.0)

    @property
    def gate_requests(self) -> int:
        return int((self.candidate_gate or {}).get("requests_to_candidate", 0))

    @property
    def user_requests_to_candidate(self) -> float:
        """Requests the candidate served that the gate did not send, while it was at weight 0."""
        return self.candidate_requests - self.gate_requests


def candidate_artifact(system: LocalSystem, name: str, adapter: str) -> str:
    """A candidate whose suite adapters are the trained ``good`` or ``bad`` one (devtools.eval_adapters)."""
    trained = ensure_eval_adapters(system.tiny)
    return system.artifact(
        name, adapters=suite_adapters(system.tiny, trained.good if adapter == "good" else trained.bad)
    )


def promote(system: LocalSystem, rollout_id: str, url: str, timeout_s: float = 900, **changes: Any) -> PromotionOutcome:
    """Roll ``url`` out while users ask; wait for the end and read the gates' part from the history.

    ``changes`` override request fields (``shadow=...`` for a shadowed rollout).
    """
    request = system.rollout_request(rollout_id, rollout_id, url, **changes)
    request["model"]["adapters"] = system.adapter_entries(url, system.tiny.adapters, version=rollout_id)
    before = emitted(CANARY, MetricName.REQUESTS)
    with traffic(system, english, every_s=0.5) as users:
        arn = wf.start(system.workflow.rollout_arn, request, name=rollout_id)
        execution = wf.wait(arn, timeout_s=timeout_s)
    artifact = state_visits(arn, "CheckArtifact")
    candidate = state_visits(arn, "TestCandidate")
    gate = candidate[-1].output["candidate_gate"]["result"] if candidate and candidate[-1].output else None
    outcome = PromotionOutcome(
        execution=execution,
        states=state_history(arn),
        users=list(users),
        artifact_gate_s=artifact[-1].seconds if artifact else None,
        candidate_gate_s=candidate[-1].seconds if candidate else None,
        candidate_gate=gate,
    )
    if gate is not None:
        # The gateway flushes its metrics every second; the gate's requests are all counted once they show.
        wait_for(
            "the candidate's request count",
            lambda: emitted(CANARY, MetricName.REQUESTS) - before >= outcome.gate_requests,
            timeout_s=60,
        )
    outcome.candidate_requests = emitted(CANARY, MetricName.REQUESTS) - before
    return outcome


#: A shadow phase sized for the local system: every live request captured for 20 s, the thresholds wide (the CPU
#: model's latency is noisy; the primary's random adapters answer unlike a trained candidate).
LOCAL_SHADOW = {
    "sampling_percent": 100,
    "seconds": 20,
    "min_requests": 5,
    "min_similarity": 0.0,
    "max_error_rate": 0.0,
    "max_latency_ratio": 10.0,
}


def users_on(outcome: PromotionOutcome, variant: str) -> list[Answer]:
    return [a for a in outcome.users if a.variant == variant]


def summary(outcome: PromotionOutcome) -> dict[str, Any]:
    """What the bench records and a failing test prints."""
    return {
        "status": outcome.execution["status"],
        "cause": json.dumps(outcome.execution.get("cause", ""))[:400],
        "gate_seconds": round(outcome.gate_seconds, 2),
        "candidate_requests": outcome.candidate_requests,
        "gate_requests": outcome.gate_requests,
        "users": {PRIMARY: len(users_on(outcome, PRIMARY)), CANARY: len(users_on(outcome, CANARY))},
    }
