"""GatewayMetrics: counters sum, observations keep raw values, drain resets, safe from threads and tasks."""

from __future__ import annotations

import asyncio
import statistics
import threading

import pytest

from fleetops.metrics import MetricName
from gateway.metrics import GATEWAY_COUNTERS, GatewayMetrics
from gateway.metrics.recorder import MAX_EVENTS


def test_counters_sum_and_drain_resets() -> None:
    metrics = GatewayMetrics()
    metrics.increment(MetricName.REQUESTS)
    metrics.increment(MetricName.REQUESTS)
    metrics.increment(MetricName.TOKENS_OUT, 17)

    first = metrics.drain()
    second = metrics.drain()

    assert first.counters[MetricName.REQUESTS] == 2.0
    assert first.counters[MetricName.TOKENS_OUT] == 17.0
    assert second.counters[MetricName.REQUESTS] == 0.0
    assert MetricName.TOKENS_OUT not in second.counters


def test_every_gateway_counter_is_reported_even_when_zero() -> None:
    # An alarm on BreakerTrips must see 0, not "missing data", in a quiet interval.
    snapshot = GatewayMetrics().drain()

    assert list(snapshot.counters) == list(GATEWAY_COUNTERS)
    assert set(snapshot.counters.values()) == {0.0}
    assert snapshot.observations == {}


def test_observations_keep_raw_values_in_order() -> None:
    metrics = GatewayMetrics()
    for value in (120.0, 80.5, 300.25):
        metrics.observe(MetricName.TIME_TO_FIRST_TOKEN, value)

    snapshot = metrics.drain()

    assert snapshot.observations == {MetricName.TIME_TO_FIRST_TOKEN: [120.0, 80.5, 300.25]}
    assert snapshot.seen == {MetricName.TIME_TO_FIRST_TOKEN: 3}
    assert metrics.drain().observations == {}


def test_over_the_cap_a_uniform_sample_is_kept() -> None:
    metrics = GatewayMetrics(max_samples=500)
    for value in range(20_000):
        metrics.observe(MetricName.REQUEST_LATENCY, float(value))

    snapshot = metrics.drain()
    kept = snapshot.observations[MetricName.REQUEST_LATENCY]

    assert len(kept) == 500
    assert snapshot.seen[MetricName.REQUEST_LATENCY] == 20_000
    # A uniform sample of 0..19999 has its median near 10000 and reaches both ends; keeping the
    # first 500 (the naive cap) would put the median at 250.
    assert 8_000 < statistics.median(kept) < 12_000
    assert min(kept) < 2_000
    assert max(kept) > 18_000


def test_unknown_metric_name_is_refused_with_a_clear_error() -> None:
    metrics = GatewayMetrics()

    with pytest.raises(ValueError, match=r"unknown metric 'TTFT'.*MetricName"):
        metrics.observe("TTFT", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown metric 'Requestz'"):
        metrics.increment("Requestz")  # type: ignore[arg-type]


def test_max_samples_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_samples must be at least 1"):
        GatewayMetrics(max_samples=0)


def test_no_update_is_lost_across_threads_while_draining() -> None:
    threads, per_thread = 8, 5_000
    # Cap above the total, so sampling cannot drop values and every one must be accounted for.
    metrics = GatewayMetrics(max_samples=threads * per_thread)
    drained: list[float] = []
    observed: list[int] = []
    stop = threading.Event()

    def drainer() -> None:
        while not stop.is_set():
            snapshot = metrics.drain()
            drained.append(snapshot.counters[MetricName.REQUESTS])
            observed.append(len(snapshot.observations.get(MetricName.TOKENS_IN, [])))

    def worker() -> None:
        for _ in range(per_thread):
            metrics.increment(MetricName.REQUESTS)
            metrics.observe(MetricName.TOKENS_IN, 3.0)

    background = threading.Thread(target=drainer)
    background.start()
    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    stop.set()
    background.join()
    final = metrics.drain()

    assert sum(drained) + final.counters[MetricName.REQUESTS] == threads * per_thread
    assert sum(observed) + len(final.observations.get(MetricName.TOKENS_IN, [])) == threads * per_thread


def test_safe_from_many_asyncio_tasks() -> None:
    metrics = GatewayMetrics()

    async def request(i: int) -> None:
        metrics.increment(MetricName.REQUESTS)
        await asyncio.sleep(0)
        metrics.observe(MetricName.TIME_TO_FIRST_TOKEN, float(i))
        metrics.increment(MetricName.TOKENS_OUT, 32)

    async def main() -> None:
        await asyncio.gather(*(request(i) for i in range(64)))

    asyncio.run(main())
    snapshot = metrics.drain()

    assert snapshot.counters[MetricName.REQUESTS] == 64
    assert snapshot.counters[MetricName.TOKENS_OUT] == 64 * 32
    assert sorted(snapshot.observations[MetricName.TIME_TO_FIRST_TOKEN]) == [float(i) for i in range(64)]


def test_events_are_kept_apart_from_the_totals_and_bounded_per_interval() -> None:
    metrics = GatewayMetrics()
    for n in range(MAX_EVENTS + 3):
        metrics.record_event({"Cause": "killed"}, [MetricName.ENGINE_DEATHS], {"n": n})

    snapshot = metrics.drain()

    assert snapshot.counters[MetricName.ENGINE_DEATHS] == 0.0  # the caller counts the totals itself
    assert [event.properties["n"] for event in snapshot.events] == list(range(MAX_EVENTS))
    assert snapshot.dropped_events == 3
    assert (metrics.drain().events, metrics.drain().dropped_events) == ([], 0)


def test_an_event_with_an_unknown_metric_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown metric 'OomKilled'"):
        GatewayMetrics().record_event({"Cause": "killed"}, ["OomKilled"], {})  # type: ignore[list-item]
