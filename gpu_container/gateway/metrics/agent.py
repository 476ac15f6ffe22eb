"""The metrics agent: every interval, scrape vLLM, read the GPUs, drain the recorder, write EMF."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import TYPE_CHECKING, TextIO

from fleetops.metrics import MetricName
from gateway.metrics.emf import GPU_DIMENSION, EmfWriter
from gateway.metrics.gpu import GpuReader, GpuReading, NvmlGpuReader
from gateway.metrics.recorder import Snapshot
from gateway.metrics.vllm_scrape import VllmScraper

if TYPE_CHECKING:
    from gateway.metrics.recorder import GatewayMetrics

logger = logging.getLogger(__name__)


class MetricsAgent:
    """Periodic EMF emitter for one SageMaker instance.

    Parameters
    ----------
    recorder
        The gateway's :class:`~gateway.metrics.recorder.GatewayMetrics`, drained once per interval.
    vllm_base_url
        The supervised engine's loopback address; its ``/metrics`` is scraped each interval.
    endpoint_name, variant_name
        Values of the ``EndpointName`` / ``VariantName`` dimensions.
    interval_s
        Seconds between flushes (CloudWatch's standard resolution is 60 s; 10 s gives alarms fresh data).
    out
        Stream for the EMF lines; ``None`` means ``sys.stdout`` at construction time.
    gpu
        GPU source; ``None`` reads NVML (and emits no GPU metrics where there is no GPU).
    scraper
        Engine scraper; ``None`` builds a :class:`~gateway.metrics.vllm_scrape.VllmScraper` for ``vllm_base_url``.
    model_version
        Value of the ``ModelVersion`` dimension of the per-adapter records (the model's ``MODEL_VERSION``).

    Examples
    --------
    >>> import io, json
    >>> import httpx
    >>> from gateway.metrics.recorder import GatewayMetrics
    >>> def engine(request):  # in-memory stand-in for vLLM's /metrics
    ...     return httpx.Response(200, text="vllm:num_requests_waiting 3")
    >>> class OneGpu:  # in-memory GPU source
    ...     def read(self):
    ...         return [GpuReading(index=0, utilization_percent=87.0, memory_used_percent=64.0)]
    >>> recorder, out = GatewayMetrics(), io.StringIO()
    >>> scraper = VllmScraper("http://127.0.0.1:8081", client=httpx.AsyncClient(transport=httpx.MockTransport(engine)))
    >>> agent = MetricsAgent(recorder, "http://127.0.0.1:8081", "manga-chat", "primary", out=out, gpu=OneGpu(),
    ...                      scraper=scraper)
    >>> async def serve() -> None:
    ...     await agent.start()
    ...     recorder.increment(MetricName.REQUESTS)  # the gateway serves; the agent flushes every interval_s
    ...     await agent.stop()  # final flush
    >>> asyncio.run(serve())
    >>> shown = ("QueueDepth", "Requests", "Gpu", "GpuUtilization")
    >>> [{k: v for k, v in json.loads(line).items() if k in shown} for line in out.getvalue().splitlines()]
    [{'QueueDepth': 3.0, 'Requests': 1.0}, {'Gpu': '0', 'GpuUtilization': 87.0}]
    """

    def __init__(
        self,
        recorder: GatewayMetrics,
        vllm_base_url: str,
        endpoint_name: str,
        variant_name: str,
        *,
        interval_s: float = 10.0,
        out: TextIO | None = None,
        gpu: GpuReader | None = None,
        scraper: VllmScraper | None = None,
        model_version: str = "",
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self._recorder = recorder
        self._model_version = model_version
        self._interval_s = interval_s
        self._writer = EmfWriter(out if out is not None else sys.stdout, endpoint_name, variant_name)
        self._gpu: GpuReader = gpu if gpu is not None else NvmlGpuReader()
        self._scraper = scraper if scraper is not None else VllmScraper(vllm_base_url)
        self._flush_lock = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start flushing every ``interval_s`` in the background (no-op when already running)."""
        if self._task is not None and not self._task.done():
            return
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name="metrics-agent")

    async def stop(self) -> None:
        """Stop the loop, letting a flush in progress finish, then flush what is left once more."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.flush_once()
        close = getattr(self._gpu, "close", None)
        if callable(close):
            close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._interval_s
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=max(0.0, deadline - loop.time()))
            if self._stopping.is_set():
                return
            # Scheduled from the previous deadline, so a slow scrape does not stretch the interval; after a
            # stall longer than an interval, start afresh rather than firing the missed flushes back to back.
            deadline = max(deadline + self._interval_s, loop.time())
            await self.flush_once()

    async def flush_once(self) -> None:
        """Scrape, read, drain and write one interval's EMF records. Never raises: failures are logged."""
        async with self._flush_lock:
            engine = await self._scraper.scrape()
            readings = await self._read_gpus()
            snapshot = self._recorder.drain()
            metrics = combine(engine, snapshot)
            try:
                await self._writer.emit(metrics)
                for adapter, series in sorted(snapshot.by_adapter.items()):
                    await self._writer.emit_adapter(combine({}, series), adapter, self._model_version)
                for event in snapshot.events:
                    properties = {**event.properties, "model_version": self._model_version}
                    await self._writer.emit_event(event.counters, event.dimensions, properties)
                if snapshot.dropped_events:
                    logger.warning("%d events over the recorder's cap were not written", snapshot.dropped_events)
                for reading in readings:
                    await self._writer.emit(
                        {
                            MetricName.GPU_UTILIZATION: reading.utilization_percent,
                            MetricName.GPU_MEMORY_USED: reading.memory_used_percent,
                        },
                        extra_dimensions={GPU_DIMENSION: str(reading.index)},
                    )
            except Exception:  # a closed stream or a rejected value: log it, keep serving
                logger.exception("writing EMF failed; this interval's metrics are lost")

    async def _read_gpus(self) -> list[GpuReading]:
        try:
            return await asyncio.to_thread(self._gpu.read)
        except Exception:  # a GPU reader must never take the gateway down
            logger.exception("GPU read failed; no GPU metrics this interval")
            return []


def combine(engine: dict[MetricName, float], snapshot: Snapshot) -> dict[MetricName, float | list[float]]:
    """Merge engine gauges, gateway counters and raw observations into one interval's metrics.

    Examples
    --------
    >>> snap = Snapshot(counters={MetricName.REQUESTS: 2.0}, observations={MetricName.TOKENS_IN: [7.0]})
    >>> combine({MetricName.QUEUE_DEPTH: 1.0}, snap)
    {<MetricName.QUEUE_DEPTH: 'QueueDepth'>: 1.0, <MetricName.REQUESTS: 'Requests'>: 2.0, \
<MetricName.TOKENS_IN: 'TokensIn'>: [7.0]}
    """
    sampled = {str(n): c for n, c in snapshot.seen.items() if c > len(snapshot.observations.get(n, ()))}
    if sampled:
        logger.info("observations sampled down to the recorder's cap this interval (seen): %s", sampled)
    mixed = sorted(str(n) for n in snapshot.counters.keys() & snapshot.observations.keys())
    if mixed:
        # One name is either a counter or a distribution, or its statistics mean nothing.
        logger.warning("metrics both incremented and observed, keeping the observations: %s", mixed)
    metrics: dict[MetricName, float | list[float]] = {**engine, **snapshot.counters}
    metrics.update(snapshot.observations)
    return metrics
