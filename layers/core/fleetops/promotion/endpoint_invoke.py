"""Ask one variant of a SageMaker endpoint (``InvokeEndpoint`` with ``TargetVariant``): the pre-traffic gate's adapter.

A request that names its variant reaches that variant whatever the weights say, so the gate can talk to a
canary at weight 0 that no user reaches. A failed answer is returned as a :class:`Reply`, never raised: the
gate counts it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from fleetops.promotion.reply import Invoke, Reply, answer_text
from fleetops.promotion.shadow_spec import CONTROL_PLANE_INFERENCE_ID

if TYPE_CHECKING:
    from mypy_boto3_sagemaker_runtime import SageMakerRuntimeClient

#: Tells the container's logs which requests were the gate's (SageMaker passes it on as
#: ``X-Amzn-SageMaker-Custom-Attributes``).
GATE_ATTRIBUTE = "pre-traffic-gate"


def variant_invoker(runtime: SageMakerRuntimeClient, endpoint_name: str) -> Invoke:
    """An :data:`~fleetops.promotion.reply.Invoke` for ``endpoint_name``."""

    def invoke(variant: str, request: dict[str, Any]) -> Reply:
        started = time.monotonic()
        try:
            response = runtime.invoke_endpoint(
                EndpointName=endpoint_name,
                TargetVariant=variant,
                ContentType="application/json",
                Accept="application/json",
                CustomAttributes=GATE_ATTRIBUTE,
                # Data capture records it: a shadow comparison never takes the gate's prompts for users'.
                InferenceId=f"{CONTROL_PLANE_INFERENCE_ID}{uuid.uuid4().hex}",
                Body=json.dumps(request),
            )
            payload = json.loads(response["Body"].read())
        except ClientError as exc:  # ModelError carries the container's own status and message
            error = exc.response.get("Error", {})
            status = int(exc.response.get("OriginalStatusCode", 0) or 0)  # type: ignore[call-overload]
            return Reply(status, None, time.monotonic() - started, f"{error.get('Code')}: {error.get('Message')}"[:300])
        except (BotoCoreError, ValueError) as exc:
            return Reply(0, None, time.monotonic() - started, f"{type(exc).__name__}: {exc}"[:300])
        text = answer_text(payload)
        return Reply(200 if text is not None else 502, text, time.monotonic() - started, "" if text else "no answer")

    return invoke
