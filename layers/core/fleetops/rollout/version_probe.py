"""Ask an endpoint which version answers, and which version its config's models carry (the rollback's check).

The adapters of :mod:`fleetops.rollout.rollback_verify`: ``InvokeEndpoint`` with the tiny prompt and no
``TargetVariant`` (as users ask it), and DescribeEndpointConfig + DescribeModel for ``MODEL_VERSION``.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from fleetops.promotion.shadow_spec import CONTROL_PLANE_INFERENCE_ID
from fleetops.rollout.rollback_verify import VERIFY_PROMPT, Answer, answered_version

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker_runtime import SageMakerRuntimeClient

#: Tells the container's logs which requests were the rollback's (passed on as custom attributes).
VERIFY_ATTRIBUTE = "rollback-verify"


def ask_versions(runtime: SageMakerRuntimeClient, endpoint_name: str, attempts: int) -> list[Answer]:
    """``attempts`` answers of the endpoint, each with the version it named or why it gave none (never raised)."""
    answers = []
    for _ in range(attempts):
        try:
            response = runtime.invoke_endpoint(
                EndpointName=endpoint_name,
                ContentType="application/json",
                Accept="application/json",
                CustomAttributes=VERIFY_ATTRIBUTE,
                # Data capture records it: a shadow comparison never takes these prompts for users'.
                InferenceId=f"{CONTROL_PLANE_INFERENCE_ID}{uuid.uuid4().hex}",
                Body=json.dumps(VERIFY_PROMPT),
            )
            payload = json.loads(response["Body"].read())
        except ClientError as exc:
            error = exc.response.get("Error", {})
            answers.append(Answer(error=f"{error.get('Code')}: {error.get('Message')}"[:300]))
            continue
        except (BotoCoreError, ValueError) as exc:
            answers.append(Answer(error=f"{type(exc).__name__}: {exc}"[:300]))
            continue
        answers.append(Answer(version=answered_version(payload)))
    return answers


def config_model_versions(sagemaker: SageMakerClient, config_name: str) -> dict[str, str | None]:
    """Variant -> the ``MODEL_VERSION`` in its model's environment (``None`` where the model names none)."""
    # Only the rollback's last pass verifies: its other passes (every poll of its loop) skip building the
    # contract's models at the function's cold start.
    from fleetops.model_contract import MODEL_VERSION

    config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    versions: dict[str, str | None] = {}
    for variant in config["ProductionVariants"]:
        model = sagemaker.describe_model(ModelName=variant["ModelName"])
        environment = (model.get("PrimaryContainer") or {}).get("Environment") or {}
        versions[variant["VariantName"]] = environment.get(MODEL_VERSION)
    return versions
