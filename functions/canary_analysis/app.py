"""Canary rollout, per step: compare the canary with the baseline over the bake window.

Event: ``{"endpoint_name", "canary_variant_name", "baseline_variant_name", "window_start", "now",
"thresholds"}``; ``thresholds`` are the rollout's overrides of the limits declared in
``fleet_config/canary_checks.yaml`` (``CANARY_CHECKS_PATH`` names another file). Returns the verdict
(pass / fail / inconclusive), its reasons, one line per check and the numbers.
"""

from __future__ import annotations

import os
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from pydantic import BaseModel

from fleetops.rollout.analysis import analyse
from fleetops.rollout.canary_metrics import CanaryMetrics
from fleetops.rollout.checks import CANARY_CHECKS, load_canary_checks
from fleetops.rollout.thresholds import Thresholds

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()
# A wrong checks file fails the cold start with a message naming the check, not a bake hours later.
checks = load_canary_checks(os.environ.get("CANARY_CHECKS_PATH") or CANARY_CHECKS)


class Event(BaseModel):
    endpoint_name: str
    canary_variant_name: str
    baseline_variant_name: str
    window_start: datetime
    now: datetime
    thresholds: Thresholds = Thresholds()


@cache
def dependencies() -> CanaryMetrics:
    """The CloudWatch adapter, built once per execution environment on its first invocation."""
    return CanaryMetrics(checks)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parsed = Event.model_validate(event)
    rollout_checks = checks.with_overrides(parsed.thresholds)
    canary, baseline = dependencies().window(
        parsed.endpoint_name,
        parsed.canary_variant_name,
        parsed.baseline_variant_name,
        parsed.window_start,
        parsed.now,
        rollout_checks,
    )
    result = analyse(canary, baseline, rollout_checks)
    logger.info("canary analysed", extra={"verdict": result.verdict, "summary": result.summary})
    return result.model_dump(mode="json")
