"""Model promotion on the local system: how long the pre-traffic gates take, and whether users meet a bad candidate.

- ``gate_seconds``: the artifact gate plus the candidate gate (load test of 10 requests and the evaluation
  suite on the candidate and the primary) of a good candidate, from the workflow's own history. The canary's
  deployment between them (a real CPU engine starting) is not a gate and is reported on its own.
- ``user_requests_to_bad_candidate`` (target 0): requests the bad candidates' gateways counted (their EMF
  ``Requests``, read back from CloudWatch) minus those the gate sent, while users asked throughout; summed over
  a candidate with a broken tokenizer and one whose adapter misses the suite's titles.
- ``shadow_*``: a good candidate with the shadow option (``LOCAL_SHADOW``): the live requests captured at weight 0
  and replayed, their mean similarity to the answers users got (and the primary's own, the ceiling sampled
  decoding leaves), and both variants' replayed p95.

Runs the scenarios of ``tests/integration/local_system/test_promotion_gates.py`` (devtools.promotion_scenarios)
once each on one gated stack; takes several minutes (real CPU engines start for every canary).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from devtools.emulator import moto_server
from devtools.local_system import local_system
from devtools.promotion_scenarios import LOCAL_SHADOW, candidate_artifact, promote
from devtools.tiny_model import ensure_tiny_model

REPO = Path(__file__).resolve().parents[1]


def run() -> dict[str, float]:
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    with (
        moto_server(),
        tempfile.TemporaryDirectory() as tmp,
        local_system(Path(tmp) / "gated", tiny, pre_traffic_gates=True) as system,
    ):
        broken = promote(system, "v2-tokenizer", system.artifact("v2-tokenizer", broken="tokenizer"))
        bad = promote(system, "v2-bad", candidate_artifact(system, "v2-bad", "bad"))
        good = promote(system, "v2-good", candidate_artifact(system, "v2-good", "good"))
        shadowed = promote(system, "v3-shadow", candidate_artifact(system, "v3-shadow", "good"), shadow=LOCAL_SHADOW)
    shadow = shadowed.output.get("shadow_comparison", {}).get("result", {})
    return {
        "gate_seconds": round(good.gate_seconds, 2),
        "artifact_gate_seconds": round(good.artifact_gate_s or -1.0, 2),
        "candidate_gate_seconds": round(good.candidate_gate_s or -1.0, 2),
        "good_candidate_promoted": float(good.execution["status"] == "SUCCEEDED"),
        "bad_candidates_stopped": float(broken.execution["status"] == "FAILED" and bad.execution["status"] == "FAILED"),
        "user_requests_to_bad_candidate": broken.user_requests_to_candidate + bad.user_requests_to_candidate,
        "gate_requests_to_bad_candidate": float(bad.gate_requests),
        "user_answers_during_bad_rollouts": float(len(broken.users) + len(bad.users)),
        "artifact_gate_refusal_seconds": round(broken.artifact_gate_s or -1.0, 2),
        "shadow_promoted": float(shadowed.execution["status"] == "SUCCEEDED"),
        "shadow_requests_replayed": float(shadow.get("requests", -1)),
        "shadow_similarity": float(shadow.get("similarity") or -1.0),
        "shadow_primary_similarity": float(shadow.get("primary_similarity") or -1.0),
        "shadow_candidate_p95_ms": float(shadow.get("candidate_p95_ms") or -1.0),
        "shadow_primary_p95_ms": float(shadow.get("primary_p95_ms") or -1.0),
    }
