"""SageMaker's per-variant invocation metrics, published for the invocations the emulated runtime answers.

On AWS, every ``InvokeEndpoint`` adds datapoints in ``AWS/SageMaker`` under ``[EndpointName, VariantName]``; moto
publishes none, so on the local system the pre-scale forecast (``Invocations``), the rate the instances really
served (``InvocationsPerInstance`` beside the container's ``QueueDepth``) and the stack's dashboard read nothing
unless a test wrote it. Here each invocation :mod:`~devtools.emulator_extensions.sagemaker_runtime` routes puts,
into moto's CloudWatch backend, what SageMaker documents for it:

- ``Invocations``: 1 per request sent to a variant (Sum: the requests);
- ``InvocationsPerInstance``: ``1 / CurrentInstanceCount`` of the variant at the time of the request;
- ``Invocation4XXErrors`` / ``Invocation5XXErrors``: 1 for a 4xx / 5xx answer of the model, otherwise 0 (a cut
  for time, SageMaker's ``ModelError``, counts as a 5xx);
- ``ModelLatency``: microseconds from sending the request to the container to its whole answer, for every answer
  the container gave.

Not emulated: ``OverheadLatency``, ``ModelSetupTime``, the per-container and per-component metrics, and CloudWatch's
ingestion delay (a datapoint is readable at once).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from moto.cloudwatch.models import cloudwatch_backends
from moto.sagemaker.models import FakeEndpoint

from fleetops.metrics import SAGEMAKER_INVOCATIONS, SAGEMAKER_INVOCATIONS_PER_INSTANCE, SAGEMAKER_NAMESPACE, Dimension

INVOCATION_4XX_ERRORS = "Invocation4XXErrors"
INVOCATION_5XX_ERRORS = "Invocation5XXErrors"
MODEL_LATENCY = "ModelLatency"


def record(
    endpoint: FakeEndpoint,
    variant: str,
    account: str,
    region: str,
    *,
    status: int | None,
    model_latency_s: float | None,
) -> None:
    """One request sent to ``variant``: ``status`` the container's answer (``None``: cut for time), and the seconds
    it took to give it (``None``: no answer)."""
    instances = next(
        (int(v.get("CurrentInstanceCount") or 0) for v in endpoint.production_variants if v["VariantName"] == variant),
        0,
    )
    failed = status is None or status >= 500
    values: list[tuple[str, float, str]] = [
        (SAGEMAKER_INVOCATIONS, 1.0, "None"),
        (INVOCATION_4XX_ERRORS, float(status is not None and 400 <= status < 500), "None"),
        (INVOCATION_5XX_ERRORS, float(failed), "None"),
    ]
    if instances:
        values.append((SAGEMAKER_INVOCATIONS_PER_INSTANCE, 1.0 / instances, "None"))
    if model_latency_s is not None:
        values.append((MODEL_LATENCY, round(model_latency_s * 1e6), "Microseconds"))
    dimensions = [
        {"Name": Dimension.ENDPOINT, "Value": endpoint.endpoint_name},
        {"Name": Dimension.VARIANT, "Value": variant},
    ]
    now = datetime.now(UTC).replace(tzinfo=None)  # moto keeps naive UTC datetimes and compares query bounds with them
    data: list[dict[str, Any]] = [
        {"MetricName": name, "Dimensions": dimensions, "Value": value, "Unit": unit, "Timestamp": now}
        for name, value, unit in values
    ]
    cloudwatch_backends[account][region].put_metric_data(SAGEMAKER_NAMESPACE, data)
