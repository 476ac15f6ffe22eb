"""The metric-name contract: the one place where metric names, units and dimensions are defined.

The GPU container emits these names as CloudWatch EMF, the alarms in ``template.yaml`` watch them,
and the alarm responder's playbook refers to them. A test checks that every alarm in the template
uses a name from here, so a rename anywhere else fails the build.
"""

from __future__ import annotations

from enum import StrEnum

#: CloudWatch namespace for everything the project emits (data plane and control plane).
NAMESPACE = "MangaAssistant/LLMServing"

#: SageMaker's own per-variant metrics that the control plane reads (the pre-scale forecast's history, and the rate
#: the instances really served: fleetops.prescale.served_capacity).
SAGEMAKER_NAMESPACE = "AWS/SageMaker"
SAGEMAKER_INVOCATIONS = "Invocations"
SAGEMAKER_INVOCATIONS_PER_INSTANCE = "InvocationsPerInstance"


class Dimension(StrEnum):
    """Dimension names. The container reads their values from its environment."""

    ENDPOINT = "EndpointName"
    VARIANT = "VariantName"
    # Per-request metrics also carry these (beside the endpoint/variant pair), so one adapter's latency or one
    # model version's errors can be told apart; per-adapter alarms watch [EndpointName, VariantName, Adapter].
    ADAPTER = "Adapter"
    MODEL_VERSION = "ModelVersion"
    # An engine death's record carries why it died (gateway.engine_death.DeathCause: cuda_oom, xid, nccl, killed,
    # other) in [EndpointName, VariantName, Cause]; the endpoint/variant totals come without it.
    CAUSE = "Cause"


class MetricName(StrEnum):
    """Every metric the project emits."""

    # --- data plane: vLLM engine (scraped from vLLM's /metrics) ---
    QUEUE_DEPTH = "QueueDepth"  # vllm:num_requests_waiting
    RUNNING_REQUESTS = "RunningRequests"  # vllm:num_requests_running
    KV_CACHE_USAGE = "KvCacheUsagePercent"  # vllm:kv_cache_usage_perc x 100
    PREFIX_CACHE_HIT_RATE = "PrefixCacheHitRate"  # hits / queries over the last interval, percent
    PREEMPTIONS = "Preemptions"  # vllm:num_preemptions_total, delta over the interval

    # --- data plane: GPU (NVML; absent without a GPU) ---
    GPU_UTILIZATION = "GpuUtilization"
    GPU_MEMORY_USED = "GpuMemoryUsedPercent"
    GPU_HEALTHY = "GpuHealthy"  # 1 per check that passed, 0 per failed one; absent where not checked

    # --- data plane: the gateway's own timings and counters ---
    REQUESTS = "Requests"
    REQUEST_ERRORS = "RequestErrors"  # 5xx-class answers and fallbacks (not client 4xx)
    CLIENT_ERRORS = "ClientErrors"  # 4xx answers
    QUEUE_WAIT = "QueueWaitMs"
    TIME_TO_FIRST_TOKEN = "TimeToFirstTokenMs"
    REQUEST_LATENCY = "RequestLatencyMs"
    TOKENS_IN = "TokensIn"
    TOKENS_OUT = "TokensOut"
    GENERATION_TIME = "GenerationTimeMs"  # first to last token of an answer (the decode; no queue, no prefill)
    BUDGET_TRIMS = "BudgetTrims"
    HISTORY_SUMMARIES = "HistorySummaries"  # summary calls to the engine (older turns, when the window slides)
    HISTORY_SUMMARY_FAILURES = "HistorySummaryFailures"  # a summary failed or timed out: the marker instead
    OOM_CAUGHT = "OomCaught"  # engine calls answered out of memory, and engine deaths of a CUDA OOM
    BREAKER_TRIPS = "BreakerTrips"
    FALLBACKS = "Fallbacks"
    ENGINE_RESTARTS = "EngineRestarts"
    ENGINE_DEATHS = "EngineDeaths"  # the engine exited, or stopped answering, unasked (a failed start included)
    BEDROCK_FALLBACK_ERRORS = "BedrockFallbackErrors"  # Bedrock failed; the fallback message answered

    # --- control plane ---
    PRESCALE_CHANGES = "PrescaleActionChanges"
    PRESCALE_INVALID_ENTRIES = "PrescaleInvalidEntries"
    PRESCALE_OVER_CAP = "PrescaleForecastOverCap"  # requests a forecast above a variant's cap would fail
    REMEDIATION_ACTIONS = "RemediationActions"
    REMEDIATION_SKIPPED = "RemediationSkipped"  # planned (dry run / kill switch) or skipped by a rail
    REMEDIATION_FAILED = "RemediationFailed"  # refused by AWS after retries
    REMEDIATION_IGNORED = "RemediationIgnoredEvents"  # not our alarm, malformed, unknown endpoint/variant


#: Units as CloudWatch spells them.
UNITS: dict[MetricName, str] = {
    MetricName.QUEUE_DEPTH: "Count",
    MetricName.RUNNING_REQUESTS: "Count",
    MetricName.KV_CACHE_USAGE: "Percent",
    MetricName.PREFIX_CACHE_HIT_RATE: "Percent",
    MetricName.PREEMPTIONS: "Count",
    MetricName.GPU_UTILIZATION: "Percent",
    MetricName.GPU_MEMORY_USED: "Percent",
    MetricName.GPU_HEALTHY: "None",
    MetricName.REQUESTS: "Count",
    MetricName.REQUEST_ERRORS: "Count",
    MetricName.CLIENT_ERRORS: "Count",
    MetricName.QUEUE_WAIT: "Milliseconds",
    MetricName.TIME_TO_FIRST_TOKEN: "Milliseconds",
    MetricName.REQUEST_LATENCY: "Milliseconds",
    MetricName.TOKENS_IN: "Count",
    MetricName.TOKENS_OUT: "Count",
    MetricName.GENERATION_TIME: "Milliseconds",
    MetricName.BUDGET_TRIMS: "Count",
    MetricName.HISTORY_SUMMARIES: "Count",
    MetricName.HISTORY_SUMMARY_FAILURES: "Count",
    MetricName.OOM_CAUGHT: "Count",
    MetricName.BREAKER_TRIPS: "Count",
    MetricName.FALLBACKS: "Count",
    MetricName.ENGINE_RESTARTS: "Count",
    MetricName.ENGINE_DEATHS: "Count",
    MetricName.BEDROCK_FALLBACK_ERRORS: "Count",
    MetricName.PRESCALE_CHANGES: "Count",
    MetricName.PRESCALE_INVALID_ENTRIES: "Count",
    MetricName.PRESCALE_OVER_CAP: "Count",
    MetricName.REMEDIATION_ACTIONS: "Count",
    MetricName.REMEDIATION_SKIPPED: "Count",
    MetricName.REMEDIATION_FAILED: "Count",
    MetricName.REMEDIATION_IGNORED: "Count",
}


def unit_of(name: MetricName) -> str:
    """Return the CloudWatch unit of a metric.

    Examples
    --------
    >>> unit_of(MetricName.TIME_TO_FIRST_TOKEN)
    'Milliseconds'
    """
    return UNITS[name]
