"""The metrics agent against the real vLLM engine on the CPU (the session's ``vllm_engine`` and ``gateway``).

Nothing is mocked but NVML (no GPU here): the agent scrapes the engine's real ``/metrics`` over HTTP
while real chats run, and its EMF output is checked against the EMF specification.
"""

from __future__ import annotations

import asyncio
import io
import socket
import time
from typing import Any

import httpx
import pytest

from devtools.local_serving import GatewayHandle
from fleetops.metrics import MetricName
from gateway.metrics import GatewayMetrics, MetricsAgent
from tests.unit.gateway_metrics.emf_spec import check_emf_line, check_emf_output, metric_names

pytestmark = pytest.mark.container

ENGINE_NAMES = {"QueueDepth", "RunningRequests", "KvCacheUsagePercent"}
# Long enough to fill several KV blocks, so repeated chats hit the prefix cache.
SYSTEM = "You are the manga store assistant. Answer about releases, orders and shipping. " * 12


class _NoGpu:
    """Stands in for NVML on this CPU machine (the real reader is tested in tests/gpu)."""

    def read(self) -> list[Any]:
        return []


@pytest.fixture(scope="module")
def engine_url(vllm_engine: Any) -> str:
    return str(vllm_engine.base_url).rstrip("/")


async def _chat(client: httpx.AsyncClient, url: str, model: str, question: str, max_tokens: int = 8) -> None:
    response = await client.post(
        f"{url}/v1/chat/completions",
        json={
            "model": model,
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        },
        timeout=120,
    )
    response.raise_for_status()


def _records(out: io.StringIO) -> list[dict[str, Any]]:
    records = check_emf_output(out.getvalue())
    out.seek(0)
    out.truncate(0)
    return records


def test_agent_reports_the_real_engine_and_the_gateway(engine_url: str) -> None:
    recorder, out = GatewayMetrics(), io.StringIO()

    async def main() -> list[dict[str, Any]]:
        agent = MetricsAgent(recorder, engine_url, "manga-chat-test", "primary", out=out, gpu=_NoGpu())
        async with httpx.AsyncClient() as client:
            model = (await client.get(f"{engine_url}/v1/models")).json()["data"][0]["id"]
            await agent.flush_once()  # baseline for the counter deltas
            _records(out)
            for i in range(6):  # same system prompt every time: all but the first reuse its KV blocks
                await _chat(client, engine_url, model, f"When is volume {i} out?")
                recorder.increment(MetricName.REQUESTS)
                recorder.observe(MetricName.TIME_TO_FIRST_TOKEN, 10.0 + i)
            await agent.stop()
        return _records(out)

    [record] = asyncio.run(main())

    assert metric_names(record) >= ENGINE_NAMES | {"PrefixCacheHitRate", "Preemptions", "Requests"}
    assert record["EndpointName"] == "manga-chat-test"
    assert record["VariantName"] == "primary"
    assert record["Requests"] == 6.0
    assert record["TimeToFirstTokenMs"] == [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    # Five of six chats share the long system prompt with an earlier one: most queried tokens hit.
    assert 50.0 < record["PrefixCacheHitRate"] <= 100.0
    assert record["Preemptions"] == 0.0
    assert record["QueueDepth"] == 0.0  # idle again after the chats
    assert record["RunningRequests"] == 0.0


def _values(value: Any) -> list[Any]:
    """EMF writes one observation as a plain number and several as a list."""
    return value if isinstance(value, list) else [value]


def test_agent_sees_requests_in_flight(engine_url: str) -> None:
    out = io.StringIO()

    async def main() -> list[dict[str, Any]]:
        agent = MetricsAgent(GatewayMetrics(), engine_url, "manga-chat-test", "primary", out=out, gpu=_NoGpu())
        records: list[dict[str, Any]] = []
        async with httpx.AsyncClient() as client:
            model = (await client.get(f"{engine_url}/v1/models")).json()["data"][0]["id"]
            # Bounded: at most 5 waves of 24 chats, and scraping stops as soon as a busy engine was seen.
            for wave in range(5):
                load = asyncio.gather(
                    *(
                        _chat(client, engine_url, model, f"Recommend a series {wave}.{i}", max_tokens=128)
                        for i in range(24)
                    )
                )
                while not load.done():
                    await agent.flush_once()
                    records += _records(out)
                await load
                if any(r.get("RunningRequests", 0) > 0 for r in records):
                    break
        return records

    records = asyncio.run(main())

    busy = [r for r in records if r.get("RunningRequests", 0) > 0]
    assert busy, f"no scrape saw a running request in {len(records)} scrapes"
    assert max(r["KvCacheUsagePercent"] for r in busy) > 0.0
    # A scrape that timed out on the saturated engine carries the gateway's own metrics only.
    assert all(0.0 <= r["KvCacheUsagePercent"] <= 100.0 for r in records if "KvCacheUsagePercent" in r)


def test_engine_not_listening_gives_gateway_metrics_only() -> None:
    with socket.socket() as sock:  # a loopback port that nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    recorder, out = GatewayMetrics(), io.StringIO()
    recorder.increment(MetricName.ENGINE_RESTARTS)

    async def main() -> None:
        agent = MetricsAgent(recorder, f"http://127.0.0.1:{port}", "e", "v", out=out, gpu=_NoGpu())
        await agent.flush_once()

    asyncio.run(main())
    [record] = check_emf_output(out.getvalue())

    assert not metric_names(record) & ENGINE_NAMES
    assert record["EngineRestarts"] == 1.0


def test_the_gateway_process_emits_valid_emf_for_real_traffic(gateway: GatewayHandle) -> None:
    before = gateway.metric_total("Requests")
    ttft_before = sum(len(_values(r.get("TimeToFirstTokenMs", []))) for r in gateway.emf_lines())
    body = {"messages": [{"role": "user", "content": "any new shonen this week?"}], "max_tokens": 8}
    with httpx.Client(timeout=60) as client:
        for _ in range(3):
            with client.stream("POST", f"{gateway.url}/invocations", json={**body, "stream": True}) as response:
                assert response.status_code == 200
                response.read()
        for _ in range(2):
            assert client.post(f"{gateway.url}/invocations", json=body).status_code == 200
    deadline = time.monotonic() + 20  # the test gateway flushes every 2 s
    while time.monotonic() < deadline and gateway.metric_total("Requests") < before + 5:
        time.sleep(0.5)

    emf = [line for line in gateway.process.stdout().splitlines() if '"_aws"' in line]
    records = [check_emf_line(line) for line in emf]  # every EMF line the real process wrote is valid
    ttft = sum(len(_values(r.get("TimeToFirstTokenMs", []))) for r in records) - ttft_before

    assert gateway.metric_total("Requests") - before == 5
    assert ttft >= 3  # one per streamed answer at least
    totals = [r for r in records if "Adapter" not in r]  # the per-adapter lines carry request metrics only
    assert metric_names(totals[-1]) >= ENGINE_NAMES  # the gateway scrapes the engine it fronts
    assert {r["EndpointName"] for r in records} == {"manga-chat-local"}
