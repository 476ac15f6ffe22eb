"""Write CloudWatch EMF JSON lines with ``aws-embedded-metrics`` to a text stream, a record at a time.

The library's own environment detection would probe for a CloudWatch agent socket or EC2 metadata;
here the environment is fixed to a local one whose sink is the given stream (stdout in the container,
where SageMaker ships it to CloudWatch Logs and the EMF records become metrics). No network, no socket.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import TYPE_CHECKING, TextIO

from aws_embedded_metrics.environment.local_environment import LocalEnvironment
from aws_embedded_metrics.logger.metrics_logger import MetricsLogger
from aws_embedded_metrics.serializers.log_serializer import LogSerializer
from aws_embedded_metrics.sinks import Sink

from fleetops.metrics import NAMESPACE, Dimension, MetricName, unit_of

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from aws_embedded_metrics.environment import Environment
    from aws_embedded_metrics.logger.metrics_context import MetricsContext

logger = logging.getLogger(__name__)

#: Dimension added to per-device GPU metrics (the NVML index).
GPU_DIMENSION = "Gpu"

#: Values of one metric in one record (EMF's limit, and where the library splits a longer list).
MAX_VALUES = 100


class StreamSink(Sink):
    """An EMF sink that writes each serialised event as one line to a text stream and flushes it."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    @staticmethod
    def name() -> str:
        return "StreamSink"

    def accept(self, context: MetricsContext) -> None:
        for line in LogSerializer.serialize(context):
            if line:
                self._out.write(line + "\n")
        self._out.flush()


class _StreamEnvironment(LocalEnvironment):
    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self.sink = StreamSink(out)


class EmfWriter:
    """Emits metrics of the contract as EMF under ``fleetops.metrics.NAMESPACE``.

    Parameters
    ----------
    out
        Where the JSON lines go (``sys.stdout`` in the container).
    endpoint_name, variant_name
        Values of the ``EndpointName`` and ``VariantName`` dimensions.

    Examples
    --------
    >>> import io, json
    >>> buffer = io.StringIO()
    >>> writer = EmfWriter(buffer, "manga-chat", "primary")
    >>> import asyncio; asyncio.run(writer.emit({MetricName.REQUESTS: 3.0}))
    >>> record = json.loads(buffer.getvalue())
    >>> record["Requests"], record["EndpointName"], record["_aws"]["CloudWatchMetrics"][0]["Namespace"]
    (3.0, 'manga-chat', 'MangaAssistant/LLMServing')
    """

    def __init__(self, out: TextIO, endpoint_name: str, variant_name: str) -> None:
        if not endpoint_name or not variant_name:
            raise ValueError(
                f"endpoint_name and variant_name must be non-empty (got {endpoint_name!r}, {variant_name!r})"
            )
        self._environment = _StreamEnvironment(out)
        self._base = {str(Dimension.ENDPOINT): endpoint_name, str(Dimension.VARIANT): variant_name}

    async def _resolve_environment(self) -> Environment:
        return self._environment

    async def emit(
        self,
        metrics: Mapping[MetricName, float | Iterable[float]],
        extra_dimensions: Mapping[str, str] | None = None,
    ) -> None:
        """Write one EMF record (more if a value array exceeds EMF's 100 values per metric).

        Parameters
        ----------
        metrics
            A value or a list of raw values per metric; units come from ``fleetops.metrics.UNITS``.
            Non-finite values are dropped with a log line (CloudWatch rejects them).
        extra_dimensions
            Added to the endpoint/variant pair as a second, finer dimension set; the record then carries
            both ``[EndpointName, VariantName, *extra]`` and ``[EndpointName, VariantName]``.
        """
        if extra_dimensions:
            await self._emit(metrics, [{**self._base, **extra_dimensions}, dict(self._base)])
        else:
            await self._emit(metrics, [dict(self._base)])

    async def emit_adapter(
        self, metrics: Mapping[MetricName, float | Iterable[float]], adapter: str, model_version: str
    ) -> None:
        """Write one adapter's metrics with dimension sets ``[EndpointName, VariantName, Adapter]`` (what its
        alarm watches, steady across releases) and ``[EndpointName, VariantName, ModelVersion, Adapter]`` (one
        release's adapter, for comparing versions). The plain endpoint/variant set is left out: those totals
        come from :meth:`emit`, and a second copy would count every request twice.

        Examples
        --------
        >>> import io, json
        >>> buffer = io.StringIO()
        >>> writer = EmfWriter(buffer, "manga-chat", "primary")
        >>> import asyncio; asyncio.run(writer.emit_adapter({MetricName.REQUESTS: 2.0}, "jp_style", "v7"))
        >>> record = json.loads(buffer.getvalue())
        >>> record["Adapter"], record["ModelVersion"], record["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
        ('jp_style', 'v7', [['EndpointName', 'VariantName', 'Adapter'], \
['EndpointName', 'VariantName', 'ModelVersion', 'Adapter']])
        """
        by_adapter = {**self._base, str(Dimension.ADAPTER): adapter}
        by_version = {**self._base, str(Dimension.MODEL_VERSION): model_version, str(Dimension.ADAPTER): adapter}
        await self._emit(metrics, [by_adapter, by_version] if model_version else [by_adapter])

    async def emit_event(
        self, metrics: Mapping[MetricName, float], dimensions: Mapping[str, str], properties: Mapping[str, object]
    ) -> None:
        """Write one occurrence (an engine death) as its own record: ``metrics`` under the one dimension set
        ``[EndpointName, VariantName, *dimensions]``, and ``properties`` as plain fields of the JSON line (CloudWatch
        Logs Insights reads them; they are no metric). The endpoint/variant totals come from :meth:`emit`.

        Examples
        --------
        >>> import io, json
        >>> buffer = io.StringIO()
        >>> writer = EmfWriter(buffer, "manga-chat", "primary")
        >>> death = writer.emit_event({MetricName.ENGINE_DEATHS: 1.0}, {"Cause": "xid"}, {"log_type": "engine_death"})
        >>> import asyncio; asyncio.run(death)
        >>> record = json.loads(buffer.getvalue())
        >>> record["Cause"], record["log_type"], record["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
        ('xid', 'engine_death', [['EndpointName', 'VariantName', 'Cause']])
        """
        await self._emit(metrics, [{**self._base, **dimensions}], properties)

    async def _emit(
        self,
        metrics: Mapping[MetricName, float | Iterable[float]],
        dimension_sets: list[dict[str, str]],
        properties: Mapping[str, object] | None = None,
    ) -> None:
        """One record per ``MAX_VALUES`` values of the longest metric, as the library splits them, each written
        on its own with the event loop's turn in between: an interval at full load holds some 10,000 values
        per metric, and written at once they held every stream the gateway relays for hundreds of ms."""
        columns = [
            (str(metric), unit_of(metric), [value] if isinstance(value, int | float) else list(value))
            for metric, value in ((MetricName(name), value) for name, value in metrics.items())
        ]
        longest = max((len(values) for _, _, values in columns), default=0)
        for start in range(0, longest, MAX_VALUES):
            if start:
                await asyncio.sleep(0)
            emf: MetricsLogger | None = None
            for name, unit, values in columns:
                part = _finite(values[start : start + MAX_VALUES], name)
                if not part:
                    continue
                if emf is None:
                    emf = self._logger(dimension_sets, properties)
                # The library checks every value it is given, which cost more than all the rest of a flush; these
                # are finite floats already, so the first goes through its checks and the others join its list.
                emf.put_metric(name, part[0], unit)
                emf.context.metrics[name].values.extend(part[1:])
            if emf is not None:
                await emf.flush()

    def _logger(self, dimension_sets: list[dict[str, str]], properties: Mapping[str, object] | None) -> MetricsLogger:
        emf = MetricsLogger(self._resolve_environment)
        emf.set_namespace(NAMESPACE)
        emf.set_dimensions(*dimension_sets, use_default=False)
        for key, value in (properties or {}).items():
            emf.set_property(key, value)
        return emf


def _finite(values: list[float], name: str) -> list[float]:
    """``values`` as floats, without the non-finite ones (CloudWatch rejects them), each dropped with a log line."""
    finite = []
    for value in values:
        if math.isfinite(value):
            finite.append(float(value))
        else:
            logger.warning("dropping non-finite value %r of %s", value, name)
    return finite
