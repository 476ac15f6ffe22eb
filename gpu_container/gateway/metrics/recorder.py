"""In-process recorder for the gateway's own counters and timings, drained by the metrics agent."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from fleetops.metrics import MetricName

#: Counters the agent emits every interval, zero included, so an alarm sees 0 rather than missing data.
GATEWAY_COUNTERS: tuple[MetricName, ...] = (
    MetricName.REQUESTS,
    MetricName.REQUEST_ERRORS,
    MetricName.CLIENT_ERRORS,
    MetricName.BUDGET_TRIMS,
    MetricName.OOM_CAUGHT,
    MetricName.BREAKER_TRIPS,
    MetricName.FALLBACKS,
    MetricName.ENGINE_RESTARTS,
)

_KNOWN: frozenset[str] = frozenset(MetricName)


def _check(name: str) -> None:
    if name not in _KNOWN:
        raise ValueError(f"unknown metric {name!r}: use a fleetops.metrics.MetricName")


@dataclass(frozen=True)
class Snapshot:
    """What was recorded between two drains.

    Attributes
    ----------
    counters
        Summed increments per metric; every name in ``GATEWAY_COUNTERS`` is present (0 when untouched).
    observations
        Raw values per metric (a uniform sample of at most ``max_samples`` when more arrived), so
        CloudWatch can compute percentiles such as TTFT p95 from the EMF value arrays.
    seen
        How many observations arrived per metric, including any that sampling left out.
    """

    counters: dict[MetricName, float] = field(default_factory=dict)
    observations: dict[MetricName, list[float]] = field(default_factory=dict)
    seen: dict[MetricName, int] = field(default_factory=dict)


class GatewayMetrics:
    """Thread- and asyncio-safe recorder of counters and observations, O(1) per call, no I/O.

    The gateway calls it several times per request; the metrics agent calls :meth:`drain` once per
    interval. One uncontended lock per call keeps it correct from both the event loop and worker threads.

    Parameters
    ----------
    max_samples
        Observations kept per metric per interval. Beyond it, reservoir sampling keeps a uniform sample
        (percentiles stay unbiased) and memory stays bounded under any load.

    Examples
    --------
    >>> metrics = GatewayMetrics()
    >>> metrics.increment(MetricName.REQUESTS)
    >>> metrics.observe(MetricName.TIME_TO_FIRST_TOKEN, 41.5)
    >>> snap = metrics.drain()
    >>> snap.counters[MetricName.REQUESTS], snap.observations[MetricName.TIME_TO_FIRST_TOKEN]
    (1.0, [41.5])
    >>> metrics.drain().counters[MetricName.REQUESTS]
    0.0
    """

    def __init__(self, max_samples: int = 10_000) -> None:
        if max_samples < 1:
            raise ValueError(f"max_samples must be at least 1, got {max_samples}")
        self._max_samples = max_samples
        self._lock = threading.Lock()
        self._counters: dict[MetricName, float] = {}
        self._observations: dict[MetricName, list[float]] = {}
        self._seen: dict[MetricName, int] = {}
        self._random = random.Random()

    def increment(self, name: MetricName, value: float = 1.0) -> None:
        """Add ``value`` to a counter.

        Raises
        ------
        ValueError
            If ``name`` is not in the metric contract (``fleetops.metrics.MetricName``).
        """
        _check(name)
        with self._lock:
            self._counters[name] = self._counters.get(name, 0.0) + value

    def observe(self, name: MetricName, value: float) -> None:
        """Record one value (a timing in ms, a token count) for percentile statistics.

        Raises
        ------
        ValueError
            If ``name`` is not in the metric contract (``fleetops.metrics.MetricName``).
        """
        _check(name)
        with self._lock:
            seen = self._seen.get(name, 0) + 1
            self._seen[name] = seen
            values = self._observations.setdefault(name, [])
            if len(values) < self._max_samples:
                values.append(value)
            else:
                # Reservoir sampling (Algorithm R): every value has the same chance to be kept.
                slot = int(self._random.random() * seen)
                if slot < self._max_samples:
                    values[slot] = value

    def drain(self) -> Snapshot:
        """Return everything recorded since the last drain and start afresh.

        Examples
        --------
        >>> GatewayMetrics().drain().counters[MetricName.BREAKER_TRIPS]
        0.0
        """
        with self._lock:
            recorded, self._counters = self._counters, {}
            observations, self._observations = self._observations, {}
            seen, self._seen = self._seen, {}
        counters = {name: recorded.pop(name, 0.0) for name in GATEWAY_COUNTERS}
        counters.update(recorded)
        return Snapshot(counters=counters, observations=observations, seen=seen)
