"""Validate Bedrock import artifacts in S3 before the import job (first task of bedrock_import.asl.json)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from pydantic import Field

from fleetops.bedrock.adapters import S3ArtifactStore
from fleetops.bedrock.models import parse_request
from fleetops.bedrock.validation import inspect_artifacts
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()


class Settings(CommonSettings):
    artifact_root: str = Field(pattern=r"^s3://.+/$")  # ARTIFACT_ROOT: the only S3 prefix imports may read


# A wrong environment fails the cold start with a clear message, before any event.
settings = Settings.from_env()


@cache
def dependencies() -> S3ArtifactStore:
    """AWS adapters, built once per execution environment on its first invocation."""
    return S3ArtifactStore()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Return the import plan; raise ImportRequestError / ArtifactValidationError (the state's error name)."""
    request = parse_request(event)
    plan = inspect_artifacts(request, dependencies(), allowed_root=settings.artifact_root)
    logger.info("artifacts valid", extra={"plan": plan.model_dump(exclude={"prompts", "poll_waits"})})
    return plan.model_dump(mode="json")
