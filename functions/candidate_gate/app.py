"""Canary rollout, before any traffic: load-test and evaluate the canary variant at weight 0.

Event (from the state machine): ``{"endpoint_name", "canary_variant_name", "baseline_variant_name"}``.
Every request names its variant (``TargetVariant``), so no user request reaches the candidate and no gate
request reaches a user. Returns the verdict (:class:`fleetops.promotion.candidate_gate.CandidateGateResult`);
its ``summary`` names the failing prompt and why. The suite is ``fleet_config/eval_suite.yaml``
(``EVAL_SUITE_PATH`` names another); the load test's latency limit is the ``latency-slo`` check of
``canary_checks.yaml`` (``CANARY_CHECKS_PATH``).
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from pydantic import BaseModel

from fleetops.aws import clients
from fleetops.promotion.candidate_gate import gate_candidate
from fleetops.promotion.endpoint_invoke import variant_invoker
from fleetops.promotion.eval_suite import EVAL_SUITE, load_eval_suite
from fleetops.promotion.reply import Invoke
from fleetops.rollout.checks import CANARY_CHECKS, load_canary_checks

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()
# A bad suite or checks file fails the cold start, naming the entry, not a rollout halfway.
suite = load_eval_suite(os.environ.get("EVAL_SUITE_PATH") or EVAL_SUITE)
latency_limit_ms = load_canary_checks(os.environ.get("CANARY_CHECKS_PATH") or CANARY_CHECKS).checks["latency-slo"].limit


class Event(BaseModel):
    endpoint_name: str
    canary_variant_name: str
    baseline_variant_name: str


@cache
def dependencies(endpoint_name: str) -> Invoke:
    """The SageMaker runtime adapter for the endpoint, built once per execution environment."""
    return variant_invoker(clients.client("sagemaker-runtime"), endpoint_name)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parsed = Event.model_validate(event)
    result = gate_candidate(
        dependencies(parsed.endpoint_name),
        suite,
        candidate=parsed.canary_variant_name,
        primary=parsed.baseline_variant_name,
        latency_limit_ms=latency_limit_ms,
    )
    logger.info("candidate gate", extra={"passed": result.passed, "summary": result.summary})
    return result.model_dump(mode="json")
