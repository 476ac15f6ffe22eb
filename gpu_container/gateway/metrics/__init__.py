"""The gateway's metrics: an in-process recorder and an agent that emits CloudWatch EMF on stdout.

Every ``interval_s`` the :class:`MetricsAgent` writes EMF JSON lines (namespace
``fleetops.metrics.NAMESPACE``, names and units only from ``fleetops.metrics``):

- one line with dimensions ``[EndpointName, VariantName]`` carrying

  - from vLLM's ``/metrics`` (skipped while the engine is down): ``QueueDepth``
    (``vllm:num_requests_waiting``), ``RunningRequests`` (``vllm:num_requests_running``),
    ``KvCacheUsagePercent`` (``vllm:kv_cache_usage_perc`` x 100), ``PrefixCacheHitRate`` (percent, from
    the deltas of ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total`` over the
    interval; absent when there were no queries) and ``Preemptions`` (delta of
    ``vllm:num_preemptions_total``), both from the second scrape on; counters and gauges are summed
    over label sets (``model_name``, engine), the KV-cache fraction is averaged;
  - the gateway's counters, every interval and 0 when nothing happened: ``Requests``,
    ``RequestErrors``, ``ClientErrors``, ``BudgetTrims``, ``HistorySummaries``, ``HistorySummaryFailures``,
    ``OomCaught``, ``BreakerTrips``, ``Fallbacks``, ``EngineRestarts``, ``EngineDeaths``, ``BedrockFallbackErrors``;
  - the gateway's observations as raw value arrays (so CloudWatch computes p50/p95/p99):
    ``QueueWaitMs``, ``TimeToFirstTokenMs``, ``RequestLatencyMs``, ``TokensIn``, ``TokensOut``, and
    ``GpuHealthy`` (1 or 0 per GPU health check, see :mod:`gateway.gpu_health`; none without a GPU). EMF
    takes at most 100 values per metric per line, so a busy interval spans several lines (counters only
    in the first); beyond 10,000 values per interval the recorder keeps a uniform sample;

- one line per adapter that served in the interval (:meth:`GatewayMetrics.record_adapter`, fed by
  :mod:`gateway.request_log`) with dimension sets ``[EndpointName, VariantName, Adapter]`` and
  ``[EndpointName, VariantName, ModelVersion, Adapter]``: ``Requests``, ``RequestErrors``, ``ClientErrors``,
  ``Fallbacks`` (0 included), ``TokensIn`` and, for answers the engine gave, ``RequestLatencyMs``,
  ``TimeToFirstTokenMs``, ``QueueWaitMs``, ``GenerationTimeMs``, ``TokensOut``;

- one line per event recorded in the interval (:meth:`GatewayMetrics.record_event`): an engine death
  (:mod:`gateway.supervisor`) with ``EngineDeaths`` and, for an out-of-memory death, ``OomCaught``, under the one
  dimension set ``[EndpointName, VariantName, Cause]``, and the properties ``log_type`` (``engine_death``),
  ``cause``, ``phase``, ``exit_status``, ``evidence``, ``pid``, ``model_version``;

- one line per GPU (NVML; none without a GPU) with ``GpuUtilization`` and ``GpuMemoryUsedPercent`` and
  two dimension sets, ``[EndpointName, VariantName, Gpu]`` (per device, ``Gpu`` = NVML index) and
  ``[EndpointName, VariantName]`` (CloudWatch aggregates across the devices: Average, Maximum).

The endpoint and variant values come from the constructor; the gateway reads them from the model's
contract (``ENDPOINT_NAME``, ``VARIANT_NAME``, see :mod:`fleetops.model_contract`).
"""

from __future__ import annotations

from gateway.metrics.agent import MetricsAgent, combine
from gateway.metrics.emf import GPU_DIMENSION, EmfWriter
from gateway.metrics.gpu import GpuReader, GpuReading, NvmlGpuReader
from gateway.metrics.recorder import GATEWAY_COUNTERS, Event, GatewayMetrics, Snapshot
from gateway.metrics.vllm_scrape import EngineSample, VllmScraper, engine_metrics, parse_vllm_metrics

__all__ = [
    "GATEWAY_COUNTERS",
    "GPU_DIMENSION",
    "EmfWriter",
    "EngineSample",
    "Event",
    "GatewayMetrics",
    "GpuReader",
    "GpuReading",
    "MetricsAgent",
    "NvmlGpuReader",
    "Snapshot",
    "VllmScraper",
    "combine",
    "engine_metrics",
    "parse_vllm_metrics",
]
