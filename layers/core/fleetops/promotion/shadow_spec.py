"""A rollout's ``shadow`` option, and the mark of the requests the control plane sends an endpoint itself.

Apart from :mod:`fleetops.promotion.shadow` (reading captures, scoring, judging): a rollout request names the
option, and the adapters that ask an endpoint mark their requests, without loading the comparison.
"""

from __future__ import annotations

from pydantic import Field

from fleetops.validation import StrictModel

#: Every request the control plane sends an endpoint itself (the candidate gate's prompts, the comparison's
#: replays) carries an ``InferenceId`` starting with this. Data capture records it, and the comparison never
#: counts such a record as a live request.
CONTROL_PLANE_INFERENCE_ID = "fleetops-control-"


class ShadowSpec(StrictModel):
    """The rollout option; ``None`` (the default) runs no shadow phase."""

    sampling_percent: int = Field(
        default=20, ge=1, le=100, description="share of live requests captured (fleet.yaml caps it per environment)"
    )
    seconds: int = Field(
        default=3600, ge=1, le=6 * 3600, description="how long capture stays on before it is switched off"
    )
    min_requests: int = Field(default=50, ge=1, description="fewer captured requests than this: no verdict, no pass")
    max_requests: int = Field(default=200, ge=1, le=1000, description="at most this many are replayed")
    min_similarity: float = Field(default=0.5, ge=0.0, le=1.0, description="mean similarity to the users' answers")
    max_error_rate: float = Field(default=0.005, ge=0.0, le=1.0, description="candidate's failed replays")
    max_latency_ratio: float = Field(default=1.2, gt=0.0, description="candidate p95 over the primary's, replayed")
