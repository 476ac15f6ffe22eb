"""Parsing real vLLM 0.32 /metrics text and turning scrapes into contract metrics.

The HTTP side uses ``httpx.MockTransport`` (no socket) serving the captured bodies: unit tests run
without network; ``tests/container/test_metrics_live.py`` scrapes the real engine.
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from fleetops.metrics import MetricName
from gateway.metrics import EngineSample, VllmScraper, engine_metrics, parse_vllm_metrics

ENGINE = "http://127.0.0.1:8081"


def test_parses_the_real_idle_engine(idle_text: str) -> None:
    sample = parse_vllm_metrics(idle_text)

    assert sample == EngineSample(
        waiting=0.0, running=0.0, kv_cache_usage=0.0, prefix_hits=0.0, prefix_queries=0.0, preemptions=0.0
    )


def test_parses_the_real_engine_under_load(load_text: str) -> None:
    sample = parse_vllm_metrics(load_text)

    assert sample.running == 6.0
    assert sample.waiting == 2.0  # vllm:num_requests_waiting, not the _by_reason breakdown counted twice
    assert sample.kv_cache_usage == pytest.approx(0.0026858747405689165)
    assert sample.prefix_queries == 22785.0
    assert sample.prefix_hits == 19200.0
    assert sample.preemptions == 0.0


def _second_engine(text: str) -> str:
    """The same body as if vLLM ran two engines (data parallel): each vllm: series again with engine="1"."""
    extra = [line.replace('engine="0"', 'engine="1"') for line in text.splitlines() if 'engine="0"' in line]
    lines = text.splitlines()
    # Samples must stay inside their family block, so insert each copy right after its original.
    out: list[str] = []
    copies = iter(extra)
    for line in lines:
        out.append(line)
        if 'engine="0"' in line:
            out.append(next(copies))
    return "\n".join(out) + "\n"


def test_sums_counts_over_label_sets_and_averages_the_kv_fraction(load_text: str) -> None:
    sample = parse_vllm_metrics(_second_engine(load_text))

    assert sample.running == 12.0
    assert sample.waiting == 4.0
    assert sample.prefix_hits == 38400.0
    # Two engines each 0.27 % full are 0.27 % full, not 0.54 %.
    assert sample.kv_cache_usage == pytest.approx(0.0026858747405689165)


def test_missing_series_are_none_not_zero() -> None:
    sample = parse_vllm_metrics('vllm:num_requests_running{engine="0",model_name="m"} 3.0\n')

    assert sample.running == 3.0
    assert sample.waiting is None
    assert engine_metrics(sample, None) == {MetricName.RUNNING_REQUESTS: 3.0}


def test_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_vllm_metrics("<html>502 Bad Gateway</html>")


def test_first_scrape_gives_gauges_only(warm_text: str) -> None:
    metrics = engine_metrics(parse_vllm_metrics(warm_text), None)

    assert metrics == {
        MetricName.QUEUE_DEPTH: 0.0,
        MetricName.RUNNING_REQUESTS: 0.0,
        MetricName.KV_CACHE_USAGE: 0.0,
    }


def test_hit_rate_and_preemptions_from_deltas_between_real_scrapes(warm_text: str, load_text: str) -> None:
    metrics = engine_metrics(parse_vllm_metrics(load_text), parse_vllm_metrics(warm_text))

    # hits 15360 -> 19200, queries 17793 -> 22785: 3840 / 4992 of the interval's queried tokens hit.
    assert metrics[MetricName.PREFIX_CACHE_HIT_RATE] == pytest.approx(100 * 3840 / 4992)
    assert metrics[MetricName.PREEMPTIONS] == 0.0
    assert metrics[MetricName.QUEUE_DEPTH] == 2.0
    assert metrics[MetricName.RUNNING_REQUESTS] == 6.0
    assert metrics[MetricName.KV_CACHE_USAGE] == pytest.approx(0.26858747405689165)


def test_an_engine_restart_resets_counters_without_negative_deltas() -> None:
    before = EngineSample(0, 0, 0.1, prefix_hits=9000, prefix_queries=10000, preemptions=40)
    after_restart = EngineSample(0, 0, 0.1, prefix_hits=30, prefix_queries=100, preemptions=2)

    metrics = engine_metrics(after_restart, before)

    assert metrics[MetricName.PREEMPTIONS] == 2.0
    assert metrics[MetricName.PREFIX_CACHE_HIT_RATE] == pytest.approx(30.0)


def test_no_queries_in_the_interval_means_no_hit_rate() -> None:
    idle = EngineSample(0, 0, 0.0, prefix_hits=50, prefix_queries=100, preemptions=0)

    assert MetricName.PREFIX_CACHE_HIT_RATE not in engine_metrics(idle, idle)


def _scraper(handler: httpx.MockTransport) -> tuple[VllmScraper, httpx.AsyncClient]:
    client = httpx.AsyncClient(transport=handler)
    return VllmScraper(ENGINE, client=client), client


def test_scraper_reads_metrics_and_keeps_the_previous_scrape(warm_text: str, load_text: str) -> None:
    bodies = iter([warm_text, load_text])
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        return httpx.Response(200, text=next(bodies))

    async def main() -> tuple[dict[MetricName, float], dict[MetricName, float]]:
        scraper, client = _scraper(httpx.MockTransport(handler))
        async with client:
            return await scraper.scrape(), await scraper.scrape()

    first, second = asyncio.run(main())

    assert paths == ["/metrics", "/metrics"]
    assert MetricName.PREFIX_CACHE_HIT_RATE not in first
    assert second[MetricName.PREFIX_CACHE_HIT_RATE] == pytest.approx(100 * 3840 / 4992)


def test_a_down_engine_is_skipped_logged_once_and_recovers(caplog: pytest.LogCaptureFixture, load_text: str) -> None:
    answers: list[httpx.Response | Exception] = [
        httpx.ConnectError("connection refused"),
        httpx.Response(503, text="engine dead"),
        httpx.Response(200, text="<html>not prometheus</html>"),
        httpx.Response(200, text=load_text),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def main() -> list[dict[MetricName, float]]:
        scraper, client = _scraper(httpx.MockTransport(handler))
        async with client:
            return [await scraper.scrape() for _ in range(4)]

    with caplog.at_level(logging.INFO, logger="gateway.metrics.vllm_scrape"):
        results = asyncio.run(main())

    assert results[:3] == [{}, {}, {}]
    assert results[3][MetricName.RUNNING_REQUESTS] == 6.0
    messages = [r.getMessage() for r in caplog.records]
    assert sum("vLLM metrics unavailable" in m for m in messages) == 1, messages
    assert sum("vLLM metrics back" in m for m in messages) == 1, messages
