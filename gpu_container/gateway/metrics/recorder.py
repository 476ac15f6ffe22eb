"""In-process recorder for the gateway's own counters and timings, drained by the metrics agent."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fleetops.metrics import MetricName

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

#: Counters the agent emits every interval, zero included, so an alarm sees 0 rather than missing data.
GATEWAY_COUNTERS: tuple[MetricName, ...] = (
    MetricName.REQUESTS,
    MetricName.REQUEST_ERRORS,
    MetricName.CLIENT_ERRORS,
    MetricName.BUDGET_TRIMS,
    MetricName.HISTORY_SUMMARIES,
    MetricName.HISTORY_SUMMARY_FAILURES,
    MetricName.OOM_CAUGHT,
    MetricName.BREAKER_TRIPS,
    MetricName.FALLBACKS,
    MetricName.ENGINE_RESTARTS,
    MetricName.ENGINE_DEATHS,
    MetricName.BEDROCK_FALLBACK_ERRORS,  # 0 where no fallback model failed (or none is configured)
)

#: Counters of each adapter that served in the interval (0 included), so a per-adapter error rate has a denominator.
ADAPTER_COUNTERS: tuple[MetricName, ...] = (
    MetricName.REQUESTS,
    MetricName.REQUEST_ERRORS,
    MetricName.CLIENT_ERRORS,
    MetricName.FALLBACKS,
)

_KNOWN: frozenset[str] = frozenset(MetricName)

#: Events kept per interval; beyond it they are dropped (counted in ``Snapshot.dropped_events``). An engine that
#: dies in a loop restarts with backoff, so this is never reached short of a bug.
MAX_EVENTS = 100


def _check(name: str) -> None:
    if name not in _KNOWN:
        raise ValueError(f"unknown metric {name!r}: use a fleetops.metrics.MetricName")


@dataclass(frozen=True)
class Event:
    """One occurrence written as its own EMF record (an engine death): counters under extra dimensions, and
    properties that say what happened (log fields, not metrics)."""

    dimensions: dict[str, str]
    counters: dict[MetricName, float]
    properties: dict[str, object]


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
    by_adapter
        The finished requests of each adapter seen in the interval (:meth:`GatewayMetrics.record_adapter`),
        with every name in ``ADAPTER_COUNTERS`` present.
    events
        The :meth:`GatewayMetrics.record_event` calls of the interval, in order (at most ``MAX_EVENTS``).
    dropped_events
        Events left out beyond ``MAX_EVENTS``.
    """

    counters: dict[MetricName, float] = field(default_factory=dict)
    observations: dict[MetricName, list[float]] = field(default_factory=dict)
    seen: dict[MetricName, int] = field(default_factory=dict)
    by_adapter: dict[str, Snapshot] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    dropped_events: int = 0


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
        self._random = random.Random()
        self._all = _Series()
        self._adapters: dict[str, _Series] = {}
        self._events: list[Event] = []
        self._dropped_events = 0

    def increment(self, name: MetricName, value: float = 1.0) -> None:
        """Add ``value`` to a counter.

        Raises
        ------
        ValueError
            If ``name`` is not in the metric contract (``fleetops.metrics.MetricName``).
        """
        _check(name)
        with self._lock:
            self._all.increment(name, value)

    def observe(self, name: MetricName, value: float) -> None:
        """Record one value (a timing in ms, a token count) for percentile statistics.

        Raises
        ------
        ValueError
            If ``name`` is not in the metric contract (``fleetops.metrics.MetricName``).
        """
        _check(name)
        with self._lock:
            self._all.observe(name, value, self._max_samples, self._random)

    def record_adapter(self, adapter: str, counted: Iterable[MetricName], observed: Mapping[MetricName, float]) -> None:
        """Record one finished request under its adapter (emitted with the ``Adapter`` dimension).

        Only these per-adapter series get the request; the endpoint/variant totals come from
        :meth:`increment` and :meth:`observe` as before, so nothing is counted twice there.

        Examples
        --------
        >>> metrics = GatewayMetrics()
        >>> metrics.record_adapter("jp_style", [MetricName.REQUESTS], {MetricName.REQUEST_LATENCY: 812.0})
        >>> snap = metrics.drain().by_adapter["jp_style"]
        >>> snap.counters[MetricName.REQUESTS], snap.observations[MetricName.REQUEST_LATENCY]
        (1.0, [812.0])
        """
        for name in (*counted, *observed):
            _check(name)
        with self._lock:
            series = self._adapters.get(adapter)
            if series is None:
                series = self._adapters[adapter] = _Series()
            for name in counted:
                series.increment(name, 1.0)
            for name, value in observed.items():
                series.observe(name, value, self._max_samples, self._random)

    def record_event(
        self, dimensions: Mapping[str, str], counted: Iterable[MetricName], properties: Mapping[str, object]
    ) -> None:
        """Record one occurrence for its own EMF record, with ``dimensions`` beside the endpoint/variant pair.

        Only that record gets the counts: the endpoint/variant totals come from :meth:`increment`, so the caller
        increments those too, and nothing is counted twice under one dimension set.

        Examples
        --------
        >>> metrics = GatewayMetrics()
        >>> metrics.record_event({"Cause": "cuda_oom"}, [MetricName.ENGINE_DEATHS], {"cause": "cuda_oom"})
        >>> event = metrics.drain().events[0]
        >>> event.dimensions, event.counters, event.properties
        ({'Cause': 'cuda_oom'}, {<MetricName.ENGINE_DEATHS: 'EngineDeaths'>: 1.0}, {'cause': 'cuda_oom'})
        """
        counters: dict[MetricName, float] = {}
        for name in counted:
            _check(name)
            counters[name] = counters.get(name, 0.0) + 1.0
        event = Event(dict(dimensions), counters, dict(properties))
        with self._lock:
            if len(self._events) < MAX_EVENTS:
                self._events.append(event)
            else:
                self._dropped_events += 1

    def drain(self) -> Snapshot:
        """Return everything recorded since the last drain and start afresh.

        Examples
        --------
        >>> GatewayMetrics().drain().counters[MetricName.BREAKER_TRIPS]
        0.0
        """
        with self._lock:
            recorded, self._all = self._all, _Series()
            adapters, self._adapters = self._adapters, {}
            events, self._events = self._events, []
            dropped, self._dropped_events = self._dropped_events, 0
        snapshot = recorded.snapshot(GATEWAY_COUNTERS)
        by_adapter = {name: series.snapshot(ADAPTER_COUNTERS) for name, series in adapters.items()}
        return Snapshot(snapshot.counters, snapshot.observations, snapshot.seen, by_adapter, events, dropped)


class _Series:
    """One set of counters and observations (the totals, or one adapter's); the caller holds the lock."""

    __slots__ = ("counters", "observations", "seen")

    def __init__(self) -> None:
        self.counters: dict[MetricName, float] = {}
        self.observations: dict[MetricName, list[float]] = {}
        self.seen: dict[MetricName, int] = {}

    def increment(self, name: MetricName, value: float) -> None:
        self.counters[name] = self.counters.get(name, 0.0) + value

    def observe(self, name: MetricName, value: float, max_samples: int, rng: random.Random) -> None:
        seen = self.seen.get(name, 0) + 1
        self.seen[name] = seen
        values = self.observations.setdefault(name, [])
        if len(values) < max_samples:
            values.append(value)
        else:
            # Reservoir sampling (Algorithm R): every value has the same chance to be kept.
            slot = int(rng.random() * seen)
            if slot < max_samples:
                values[slot] = value

    def snapshot(self, always: tuple[MetricName, ...]) -> Snapshot:
        counters = {name: self.counters.pop(name, 0.0) for name in always}
        counters.update(self.counters)
        return Snapshot(counters=counters, observations=self.observations, seen=self.seen)
