"""Ask a freshly imported Bedrock model a few prompts through Converse (after the import job completed)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from fleetops.bedrock.adapters import BedrockConverse
from fleetops.bedrock.models import SmokeTestRequest
from fleetops.bedrock.smoke import run_smoke_test
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()

# Read only so that a wrong environment fails the cold start with a clear message, as in every function.
settings = CommonSettings.from_env()


@cache
def dependencies() -> BedrockConverse:
    """AWS adapters, built once per execution environment on its first invocation."""
    return BedrockConverse()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Return the smoke-test report; raise SmokeTestError naming every failing prompt."""
    request = SmokeTestRequest.model_validate(event)
    report = run_smoke_test(request, dependencies().ask)
    logger.info("smoke test", extra={"verdict": report.verdict, "model": request.imported_model_arn})
    return report.model_dump(mode="json")
