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

The datapoints of one second are one aggregated datapoint per metric (``StatisticValues``: sum, count, minimum,
maximum), as SageMaker publishes per-minute statistics rather than a datapoint per request: a datapoint per request
made every CloudWatch read on the local system (moto scans every stored datapoint of a query's window) slower as
traffic went on, enough to change what the demo's alarms saw. A second's datapoint is readable at once and grows
with each request of that second. No percentiles then (none is read of these metrics).

Not emulated: ``OverheadLatency``, ``ModelSetupTime``, the per-container and per-component metrics, and CloudWatch's
ingestion delay.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime

from moto.cloudwatch.models import CloudWatchBackend, MetricAggregatedDatum, cloudwatch_backends
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
    backend = cloudwatch_backends[account][region]
    dimensions = [
        {"Name": Dimension.ENDPOINT, "Value": endpoint.endpoint_name},
        {"Name": Dimension.VARIANT, "Value": variant},
    ]
    # moto keeps naive UTC datetimes and compares query bounds with them
    second = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    with _LOCK:
        for name, value, unit in values:
            _add(backend, (account, region, endpoint.endpoint_name, variant, name), second, dimensions, value, unit)


@dataclass
class _Open:
    """The datapoint of the latest second of one series, stored in ``backend``."""

    backend: CloudWatchBackend
    datum: MetricAggregatedDatum


_LOCK = threading.Lock()  # the emulator answers each request on its own thread
_OPEN: dict[tuple[str, ...], _Open] = {}


def _add(
    backend: CloudWatchBackend,
    series: tuple[str, ...],
    second: datetime,
    dimensions: list[dict[str, str]],
    value: float,
    unit: str,
) -> None:
    """Add ``value`` to the series' datapoint of ``second``, stored on first use (a reset backend starts anew)."""
    opened = _OPEN.get(series)
    if opened is not None and opened.backend is backend and opened.datum.timestamp == second:
        datum = opened.datum
        datum.min, datum.max = min(datum.min, value), max(datum.max, value)
        datum.sum, datum.sample_count = datum.sum + value, datum.sample_count + 1
        return
    datum = MetricAggregatedDatum(
        namespace=SAGEMAKER_NAMESPACE,
        name=series[-1],
        min_stat=value,
        max_stat=value,
        sample_count=1,
        sum_stat=value,
        dimensions=dimensions,
        timestamp=second,
        unit=unit,
    )
    backend.metric_data.append(datum)  # what moto's put_metric_data stores for StatisticValues
    _OPEN[series] = _Open(backend, datum)
