"""Canary rollout, shadow phase: replay the live requests captured at weight 0 to both variants and compare.

Event (from the state machine): ``{"endpoint_name", "canary_variant_name", "baseline_variant_name",
"capture_uri", "shadow"}``; ``shadow`` is the rollout's option (:class:`fleetops.promotion.shadow_spec.ShadowSpec`),
``capture_uri`` the shadow config's data capture destination (capture is already off when this runs). Returns
the comparison; its ``summary`` is what the rollout's output and, on a failure, its rollback reason say. Every
capture under ``capture_uri`` is deleted once compared, whatever the verdict.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from pydantic import BaseModel

from fleetops.aws import clients
from fleetops.promotion.endpoint_invoke import variant_invoker
from fleetops.promotion.reply import Invoke
from fleetops.promotion.shadow import judge_shadow
from fleetops.promotion.shadow_replay import captured_requests, delete_captures, replay
from fleetops.promotion.shadow_spec import ShadowSpec

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mypy_boto3_s3 import S3Client

logger = Logger()
tracer = Tracer()


class Event(BaseModel):
    endpoint_name: str
    canary_variant_name: str
    baseline_variant_name: str
    capture_uri: str
    shadow: ShadowSpec


@cache
def dependencies(endpoint_name: str) -> tuple[S3Client, Invoke]:
    """The S3 and SageMaker runtime adapters, built once per execution environment."""
    return clients.client("s3"), variant_invoker(clients.client("sagemaker-runtime"), endpoint_name)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parsed = Event.model_validate(event)
    s3, invoke = dependencies(parsed.endpoint_name)
    limit = parsed.shadow.max_requests
    try:
        captured = captured_requests(s3, parsed.capture_uri, parsed.endpoint_name, parsed.baseline_variant_name, limit)
        replays = replay(invoke, captured, parsed.canary_variant_name, parsed.baseline_variant_name)
    finally:
        deleted = delete_captures(s3, parsed.capture_uri)
    result = judge_shadow(replays, parsed.shadow)
    logger.info("shadow compared", extra={"passed": result.passed, "summary": result.summary, "deleted": deleted})
    return result.model_dump(mode="json")
