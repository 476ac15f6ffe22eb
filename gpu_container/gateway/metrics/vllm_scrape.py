"""Scrape vLLM's Prometheus ``/metrics`` and turn it into the engine metrics of the contract."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from fleetops.metrics import MetricName

logger = logging.getLogger(__name__)

# Sample names as vLLM 0.32 exposes them (counters carry the ``_total`` suffix on the wire).
WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREEMPTIONS = "vllm:num_preemptions_total"
_SUMMED = (WAITING, RUNNING, PREFIX_HITS, PREFIX_QUERIES, PREEMPTIONS)


@dataclass(frozen=True)
class EngineSample:
    """One scrape of the engine, summed over label sets (``model_name``, ``engine``).

    ``kv_cache_usage`` is a fraction (0-1) averaged over engines, since a sum of fractions means nothing.
    A field is ``None`` when the engine did not expose it.
    """

    waiting: float | None
    running: float | None
    kv_cache_usage: float | None
    prefix_hits: float | None
    prefix_queries: float | None
    preemptions: float | None


def parse_vllm_metrics(text: str) -> EngineSample:
    """Parse vLLM's Prometheus text into an :class:`EngineSample`.

    Parameters
    ----------
    text
        The body of ``GET /metrics``.

    Raises
    ------
    ValueError
        If the text is not Prometheus exposition format (from ``prometheus_client``'s parser).

    Examples
    --------
    >>> sample = parse_vllm_metrics(
    ...     'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0\\n'
    ...     'vllm:num_requests_waiting{engine="1",model_name="m"} 2.0\\n'
    ... )
    >>> sample.waiting, sample.running
    (5.0, None)
    """
    sums: dict[str, float] = {}
    kv_values: list[float] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in _SUMMED:
                sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
            elif sample.name == KV_CACHE_USAGE:
                kv_values.append(float(sample.value))
    return EngineSample(
        waiting=sums.get(WAITING),
        running=sums.get(RUNNING),
        kv_cache_usage=sum(kv_values) / len(kv_values) if kv_values else None,
        prefix_hits=sums.get(PREFIX_HITS),
        prefix_queries=sums.get(PREFIX_QUERIES),
        preemptions=sums.get(PREEMPTIONS),
    )


def _delta(current: float | None, previous: float | None) -> float | None:
    """Increase of a counter between two scrapes; a drop means the engine restarted (Prometheus reset rule)."""
    if current is None or previous is None:
        return None
    return current if current < previous else current - previous


def engine_metrics(current: EngineSample, previous: EngineSample | None) -> dict[MetricName, float]:
    """Map a scrape (and the one before it, for counter deltas) to contract metrics.

    Gauges come from ``current`` alone. ``Preemptions`` and ``PrefixCacheHitRate`` need two scrapes,
    like a Prometheus ``rate``; the hit rate is left out when no prefix-cache query happened in between.

    Examples
    --------
    >>> before = EngineSample(0, 1, 0.25, 100, 400, 2)
    >>> after = EngineSample(4, 8, 0.5, 190, 500, 3)
    >>> engine_metrics(after, before)[MetricName.PREFIX_CACHE_HIT_RATE]
    90.0
    """
    out: dict[MetricName, float] = {}
    if current.waiting is not None:
        out[MetricName.QUEUE_DEPTH] = current.waiting
    if current.running is not None:
        out[MetricName.RUNNING_REQUESTS] = current.running
    if current.kv_cache_usage is not None:
        out[MetricName.KV_CACHE_USAGE] = current.kv_cache_usage * 100.0
    if previous is None:
        return out
    preempted = _delta(current.preemptions, previous.preemptions)
    if preempted is not None:
        out[MetricName.PREEMPTIONS] = preempted
    hits = _delta(current.prefix_hits, previous.prefix_hits)
    queries = _delta(current.prefix_queries, previous.prefix_queries)
    if hits is not None and queries:
        out[MetricName.PREFIX_CACHE_HIT_RATE] = 100.0 * min(hits, queries) / queries
    return out


class VllmScraper:
    """Reads the engine's ``/metrics`` and remembers the previous scrape for counter deltas.

    Parameters
    ----------
    base_url
        The engine's loopback address, e.g. ``http://127.0.0.1:8081``.
    client
        An ``httpx.AsyncClient`` to reuse; ``None`` builds one per scrape.
    timeout_s
        How long one scrape may take; a slow or dead engine costs the agent no more than this.
    """

    def __init__(self, base_url: str, client: httpx.AsyncClient | None = None, timeout_s: float = 2.0) -> None:
        self._url = base_url.rstrip("/") + "/metrics"
        self._client = client
        self._timeout_s = timeout_s
        self._previous: EngineSample | None = None
        self._engine_was_down = False

    async def _fetch(self) -> str:
        if self._client is not None:
            response = await self._client.get(self._url, timeout=self._timeout_s)
        else:
            async with httpx.AsyncClient() as client:
                response = await client.get(self._url, timeout=self._timeout_s)
        response.raise_for_status()
        return response.text

    async def scrape(self) -> dict[MetricName, float]:
        """Return the engine metrics for this interval, or ``{}`` when the engine is down or answers garbage.

        Never raises: a down engine is logged once per outage, and the next good scrape resumes.
        """
        try:
            sample = parse_vllm_metrics(await self._fetch())
        except (httpx.HTTPError, ValueError) as exc:
            if not self._engine_was_down:
                logger.warning("vLLM metrics unavailable at %s, skipping engine metrics: %r", self._url, exc)
            self._engine_was_down = True
            return {}
        if self._engine_was_down:
            logger.info("vLLM metrics back at %s", self._url)
        self._engine_was_down = False
        metrics = engine_metrics(sample, self._previous)
        self._previous = sample
        return metrics
