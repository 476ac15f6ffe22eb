"""Ask a freshly imported Bedrock model a few prompts through Converse (after the import job completed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from fleetops.bedrock.adapters import BedrockConverse
from fleetops.bedrock.models import SmokeTestRequest
from fleetops.bedrock.smoke import run_smoke_test
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

SETTINGS = CommonSettings.from_env()  # fails at cold start on a broken environment
CONVERSE = BedrockConverse()
logger = Logger()
tracer = Tracer()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Return the smoke-test report; raise SmokeTestError naming every failing prompt."""
    request = SmokeTestRequest.model_validate(event)
    report = run_smoke_test(request, CONVERSE.ask)
    logger.info("smoke test", extra={"verdict": report.verdict, "model": request.imported_model_arn})
    return report.model_dump(mode="json")
