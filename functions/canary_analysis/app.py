"""Canary rollout, per step: compare the canary with the baseline over the bake window.

Event: ``{"endpoint_name", "canary_variant_name", "baseline_variant_name", "window_start", "now",
"thresholds"}``; ``thresholds`` are the rollout's overrides of the limits declared in
``fleet_config/canary_checks.yaml`` (``CANARY_CHECKS_PATH`` names another file). Returns the verdict
(pass / fail / inconclusive), its reasons, one line per check and the numbers.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from fleetops.rollout.analysis import analyse
from fleetops.rollout.canary_metrics import CanaryMetrics
from fleetops.rollout.checks import CANARY_CHECKS, Thresholds, load_canary_checks

logger = Logger()
tracer = Tracer()
# A wrong checks file fails the cold start with a message naming the check, not a bake hours later.
checks = load_canary_checks(os.environ.get("CANARY_CHECKS_PATH") or CANARY_CHECKS)
source = CanaryMetrics(checks)


class Event(BaseModel):
    endpoint_name: str
    canary_variant_name: str
    baseline_variant_name: str
    window_start: datetime
    now: datetime
    thresholds: Thresholds = Thresholds()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    e = Event.model_validate(event)
    canary = source.variant_stats(e.endpoint_name, e.canary_variant_name, e.window_start, e.now)
    baseline = source.variant_stats(e.endpoint_name, e.baseline_variant_name, e.window_start, e.now)
    result = analyse(canary, baseline, checks.with_overrides(e.thresholds))
    logger.info("canary analysed", extra={"verdict": result.verdict, "summary": result.summary})
    return result.model_dump(mode="json")
