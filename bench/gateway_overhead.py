"""The gateway's cost: its CPU time per request and the latency it adds at 200 concurrent streams, then throughput.

Against a fast stand-in upstream (``devtools.standin_engine``: no model, every answer at once, ``STANDIN_TOKENS``
tokens streamed ``STANDIN_INTERVAL_S`` apart, as a loaded GPU decodes), so the gateway is the only thing that can
be slow. Three sides take the same load in turn, in ``STANDIN_ROUNDS`` rounds whose order alternates (so a drift
in the shared machine's load hits all alike): the stand-in direct, the gateway in front of it, and
``devtools.bare_proxy`` in front of it (the gateway's server stack, uvicorn + uvloop + httptools with an aiohttp
upstream, relaying bytes and doing nothing else: the floor a Python proxy on this stack adds, measured beside it).
A request's latency is from sending it to its stream's last byte; an "added" figure is a side's percentile minus
the stand-in's (percentiles of different requests: a pair of requests cannot be sent twice).

- ``gateway_added_p50_ms_200`` / ``gateway_added_p99_ms_200`` (target p99 <= 3 ms), ``bare_proxy_added_*_ms_200``:
  200 concurrent streams as independent users make them: open-loop arrivals, a seeded Poisson schedule (the same
  for every side) at ``streams / stream duration`` requests a second, so 200 streams are open on average
  (Little's law). ``arrival_rps_200`` is that rate. A proxy the host's other work leaves less CPU than these
  arrivals need falls behind and its queue shows here (the bare proxy's figure tells such a run apart).
- ``*_added_p50_ms_200_closed`` / ``*_added_p99_ms_200_closed``: 200 clients in a closed loop, each sending its
  next request when its last stream ended (this bench's figure before the open-loop one). With equal stream
  lengths the clients fall into step: requests arrive in bursts, each waiting for those ahead of it in the
  burst, so this figure grows with the burst's size times the per-request cost (a throughput cost, which the
  CPU figures count) more than it shows what one request meets.
- ``gateway_cpu_ms_per_request_standin_200`` / ``bare_proxy_cpu_ms_per_request_200``: each proxy process's own
  CPU time per request, over both loads.
- ``host_load_1m``: the machine's load average when the runs began (other work on a shared host shows here).

Then the same real vLLM engine (CPU, tiny model) direct and through the gateway:

- ``gateway_throughput_ratio_16`` / ``_64``: completed streamed requests per second through the gateway
  (``/invocations``, ``stream: true``) over direct to vLLM (``/v1/chat/completions`` with the exact
  prompt the gateway builds), 16 and 64 concurrent streams, 32 generated tokens each (``min_tokens``).
  Runs alternate in ``ROUNDS`` paired rounds (A B, then B A, so a drift in the shared machine's load
  hits both sides alike); the ratio is the median of the per-round ratios. The CPU engine is the bottleneck
  here, not the gateway: the ratio says the gateway does not slow a busy engine, not what the gateway costs.
- ``gateway_added_p50_ms``: one request at a time (``max_tokens`` 1), direct and gateway alternating
  request by request; median gateway latency minus median direct latency.
- ``gateway_rss_mb``: the gateway process's peak resident memory (VmHWM) after the 64-stream runs.
- ``gateway_cpu_ms_per_request_16`` / ``_64``: the gateway's own CPU time per relayed request.

CPU layout. On a GPU instance the engine computes on the GPU and the gateway's CPU time is not taken
from it. Here the engine computes on the CPU, so when everything shares every core each gateway
CPU-millisecond slows the engine and the ratio measures the machine's contention more than the gateway
(runs on a shared 2-core host swung from 0.76 to 1.12). So the engine (API server and compute threads)
is pinned to the lower half of the CPUs and the gateway and the load generator to the upper half; the
direct runs use the same layout, so both sides drive the same engine on the same cores
(``engine_cpus`` / ``front_cpus`` record it). Against the stand-in, the proxy measured (gateway or bare proxy) has
the upper half and the stand-in and the load generator share the lower half in every run, the direct ones
included: the load generator never takes the proxy's CPU, so the added figures are the proxy's, not contention
with the client (the stand-in runs before the engine starts). With a single CPU nothing is pinned.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import httpx

from devtools.bare_proxy import start_bare_proxy
from devtools.local_serving import start_engine, start_gateway, start_standin_engine
from devtools.tiny_model import TinyModel, ensure_tiny_model

if TYPE_CHECKING:
    from collections.abc import Iterator

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 8
RUN_S = 3.0
TOKENS = 32
LATENCY_SAMPLES = 120
QUESTION = "which manga volumes ship next week?"
ADAPTER = "manga_domain"
STANDIN_STREAMS = 200
STANDIN_TOKENS = 16
STANDIN_INTERVAL_S = 0.05  # 20 tokens/s per stream
STANDIN_ROUNDS = 4
STANDIN_RUN_S = 6.0
STANDIN_WARM_S = 1.0  # requests sent in a run's first second (connections opening) are not counted
STANDIN_SEED = 7  # of the open-loop arrival schedule, the same for every side


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


async def _load(url: str, payload: dict[str, Any], streams: int, seconds: float) -> tuple[float, int]:
    """Closed loop: ``streams`` clients each send the next request when the last one finished.

    The load generator uses aiohttp (C parser) and reads raw bytes: a pure-Python client would spend
    more CPU on vLLM's one-event-per-token stream than on the gateway's coalesced one, and on a shared
    2-core machine that CPU comes out of the engine, which would flatter the gateway.
    Returns (completed requests per second, completed requests).
    """
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        done = 0
        stop_at = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < stop_at:
                async with session.post(url, json=payload) as response:
                    if response.status != 200:
                        raise RuntimeError(f"{url}: HTTP {response.status}")
                    async for _ in response.content.iter_any():
                        pass
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(streams)))
        return done / (time.perf_counter() - started), done


async def _timed_load(url: str, payload: dict[str, Any], streams: int, seconds: float) -> tuple[list[float], int]:
    """Closed loop as :func:`_load`; each request's milliseconds from sending it to its last byte.

    Returns (the latencies of requests sent after the first ``STANDIN_WARM_S``, every completed request).
    """
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        latencies: list[float] = []
        done = 0
        began = time.perf_counter()
        stop_at = began + seconds

        async def worker() -> None:
            nonlocal done
            while (sent := time.perf_counter()) < stop_at:
                async with session.post(url, json=payload) as response:
                    if response.status != 200:
                        raise RuntimeError(f"{url}: HTTP {response.status}")
                    async for _ in response.content.iter_any():
                        pass
                if sent - began >= STANDIN_WARM_S:
                    latencies.append((time.perf_counter() - sent) * 1000)
                done += 1

        await asyncio.gather(*(worker() for _ in range(streams)))
        return latencies, done


def arrivals(rate: float, seconds: float, seed: int = STANDIN_SEED) -> list[float]:
    """A Poisson schedule: send times (seconds from the start) at ``rate`` a second on average, reproducible.

    Examples
    --------
    >>> times = arrivals(250, 6.0)
    >>> times == arrivals(250, 6.0), 1400 < len(times) < 1600, times == sorted(times)
    (True, True, True)
    """
    draw, at, times = random.Random(seed), 0.0, []
    while (at := at + draw.expovariate(rate)) < seconds:
        times.append(at)
    return times


async def _open_load(url: str, payload: dict[str, Any], schedule: list[float]) -> tuple[list[float], int]:
    """Open loop: one request at each time of ``schedule``, whether or not earlier ones have finished.

    Returns (the milliseconds from sending to the last byte of requests sent after the first ``STANDIN_WARM_S``,
    every completed request).
    """
    connector = aiohttp.TCPConnector(limit=0)  # no pool limit: a request never waits for another's connection
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        latencies: list[float] = []
        began = time.perf_counter()

        async def one(at: float) -> None:
            await asyncio.sleep(max(began + at - time.perf_counter(), 0))
            sent = time.perf_counter()
            async with session.post(url, json=payload) as response:
                if response.status != 200:
                    raise RuntimeError(f"{url}: HTTP {response.status}")
                async for _ in response.content.iter_any():
                    pass
            if at >= STANDIN_WARM_S:
                latencies.append((time.perf_counter() - sent) * 1000)

        await asyncio.gather(*(one(at) for at in schedule))
        return latencies, len(schedule)


def percentile(samples: list[float], q: int) -> float:
    """The ``q``-th percentile (1..99) of ``samples``.

    Examples
    --------
    >>> percentile(list(range(1, 101)), 50), percentile(list(range(1, 101)), 99)
    (50.5, 99.01)
    """
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


async def _latencies(direct: tuple[str, dict[str, Any]], gateway: tuple[str, dict[str, Any]]) -> tuple[float, float]:
    async with httpx.AsyncClient(timeout=60) as client:
        samples: dict[str, list[float]] = {"direct": [], "gateway": []}
        for i in range(LATENCY_SAMPLES * 2):
            name, (url, payload) = ("direct", direct) if i % 2 == 0 else ("gateway", gateway)
            started = time.perf_counter()
            response = await client.post(url, json=payload)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"{url}: HTTP {response.status_code} {response.text[:200]}")
            if i >= 10:  # the first few warm connections and caches
                samples[name].append(elapsed)
        return statistics.median(samples["direct"]), statistics.median(samples["gateway"])


def cpu_layout() -> tuple[set[int] | None, set[int] | None]:
    """(engine CPUs, gateway + load generator CPUs): the lower and upper half of this process's CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    half = len(cpus) // 2
    return set(cpus[:half]), set(cpus[half:])


@contextlib.contextmanager
def on_cpus(cpus: set[int] | None) -> Iterator[None]:
    """Run this process (the load generator) on ``cpus`` for the duration."""
    before = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def run() -> dict[str, float]:
    from gateway.config import load_gateway_config
    from gateway.prompt import PromptBuilder
    from gateway.protocol import InvocationRequest
    from gateway.tokens import TokenCounter

    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    config = load_gateway_config(REPO / "gpu_container" / "config" / "gateway.yaml")
    builder = PromptBuilder(TokenCounter(tiny.model_dir), config.system_prompt, config.budget)
    invocation = {"messages": [{"role": "user", "content": QUESTION}], "adapter": ADAPTER, "max_tokens": TOKENS}
    built = builder.build(InvocationRequest.model_validate(invocation))
    sampling = {"min_tokens": TOKENS, "temperature": 0}  # the gateway refuses ignore_eos
    direct_body = {"model": ADAPTER, "messages": built.messages, "max_tokens": TOKENS, "stream": True, **sampling}
    gateway_body = {**invocation, "stream": True, **sampling}

    engine_cpus, front_cpus = cpu_layout()
    results: dict[str, float] = {"engine_cpus": len(engine_cpus or ()), "front_cpus": len(front_cpus or ())}
    with tempfile.TemporaryDirectory() as work:
        results |= _against_standin(tiny, Path(work), direct_body, gateway_body, engine_cpus, front_cpus)
    results |= _against_engine(tiny, direct_body, gateway_body, engine_cpus, front_cpus)
    return results


def _against_standin(
    tiny: TinyModel,
    work: Path,
    direct_body: dict[str, Any],
    gateway_body: dict[str, Any],
    back_cpus: set[int] | None,
    gateway_cpus: set[int] | None,
) -> dict[str, float]:
    """Added latency at ``STANDIN_STREAMS`` streams (open and closed loop) and CPU per request of the gateway and
    of the bare proxy, against the stand-in."""
    n = STANDIN_STREAMS
    stream_s = STANDIN_TOKENS * STANDIN_INTERVAL_S
    schedule = arrivals(n / stream_s, STANDIN_RUN_S)
    results: dict[str, float] = {"standin_stream_ms": round(stream_s * 1000, 1), f"arrival_rps_{n}": n / stream_s}
    with (
        start_standin_engine(work, STANDIN_TOKENS, STANDIN_INTERVAL_S, cpus=back_cpus) as standin,
        start_gateway(
            tiny, work, engine_url=standin.base_url, env={"METRICS_INTERVAL_S": "60"}, cpus=gateway_cpus
        ) as gateway,
        start_bare_proxy(standin.base_url, work, cpus=gateway_cpus) as (bare_url, bare),
        on_cpus(back_cpus),
    ):
        sides = {
            "standin": (f"{standin.base_url}/v1/chat/completions", direct_body),
            "gateway": (f"{gateway.url}/invocations", gateway_body),
            "bare_proxy": (f"{bare_url}/v1/chat/completions", direct_body),
        }
        pids = {"gateway": gateway.process.pid, "bare_proxy": bare.pid}
        for url, body in sides.values():  # warm every path
            asyncio.run(_timed_load(url, body, n, 2.0))
        results["host_load_1m"] = round(os.getloadavg()[0], 2)
        cpu = dict.fromkeys(pids, 0.0)
        requests = dict.fromkeys(pids, 0)
        for loop in ("open", "closed"):
            latencies: dict[str, list[float]] = {side: [] for side in sides}
            for round_ in range(STANDIN_ROUNDS):
                for side in sides if round_ % 2 == 0 else reversed(sides):
                    cpu_before = cpu_seconds(pids[side]) if side in pids else 0.0
                    samples, done = asyncio.run(_one_run(loop, *sides[side], schedule))
                    latencies[side] += samples
                    if side in pids:
                        cpu[side] += cpu_seconds(pids[side]) - cpu_before
                        requests[side] += done
            results |= _added(latencies, "" if loop == "open" else "_closed")
    # Completed a second through the gateway, over the open-loop and the closed-loop runs.
    results[f"gateway_rps_standin_{n}"] = round(requests["gateway"] / (2 * STANDIN_ROUNDS * STANDIN_RUN_S), 1)
    for side, key in (
        ("gateway", f"gateway_cpu_ms_per_request_standin_{n}"),
        ("bare_proxy", f"bare_proxy_cpu_ms_per_request_{n}"),
    ):
        results[key] = round(cpu[side] * 1000 / max(requests[side], 1), 3)
    return results


async def _one_run(loop: str, url: str, body: dict[str, Any], schedule: list[float]) -> tuple[list[float], int]:
    if loop == "open":
        return await _open_load(url, body, schedule)
    return await _timed_load(url, body, STANDIN_STREAMS, STANDIN_RUN_S)


def _added(latencies: dict[str, list[float]], suffix: str) -> dict[str, float]:
    """Each side's p50 and p99, and each proxy's added p50 and p99 over the stand-in's."""
    n = STANDIN_STREAMS
    results: dict[str, float] = {f"latency_samples_{n}{suffix}": float(min(len(v) for v in latencies.values()))}
    for q in (50, 99):
        direct = percentile(latencies["standin"], q)
        results[f"standin_p{q}_ms_{n}{suffix}"] = round(direct, 2)
        for side in ("gateway", "bare_proxy"):
            through = percentile(latencies[side], q)
            results[f"{side}_p{q}_ms_{n}{suffix}"] = round(through, 2)
            results[f"{side}_added_p{q}_ms_{n}{suffix}"] = round(through - direct, 2)
    return results


def _against_engine(
    tiny: TinyModel,
    direct_body: dict[str, Any],
    gateway_body: dict[str, Any],
    engine_cpus: set[int] | None,
    front_cpus: set[int] | None,
) -> dict[str, float]:
    """Throughput ratios, CPU per request, RSS and one-at-a-time added latency against the real CPU engine."""
    sampling = {"min_tokens": TOKENS, "temperature": 0}
    results: dict[str, float] = {"rounds": ROUNDS}
    with (
        tempfile.TemporaryDirectory() as work,
        start_engine(tiny, logs=Path(work), cpus=engine_cpus) as engine,
        start_gateway(
            tiny, Path(work), engine_url=engine.base_url, env={"METRICS_INTERVAL_S": "60"}, cpus=front_cpus
        ) as gateway,
        on_cpus(front_cpus),
    ):
        direct_url = f"{engine.base_url}/v1/chat/completions"
        gateway_url = f"{gateway.url}/invocations"
        asyncio.run(_load(gateway_url, gateway_body, 16, 2.0))  # warm both paths
        asyncio.run(_load(direct_url, direct_body, 16, 2.0))
        for streams in (16, 64):
            rates: dict[str, list[float]] = {"direct": [], "gateway": []}
            gateway_cpu, gateway_requests = 0.0, 0
            for round_ in range(ROUNDS):
                order = ("direct", "gateway") if round_ % 2 == 0 else ("gateway", "direct")
                for side in order:
                    url, body = (direct_url, direct_body) if side == "direct" else (gateway_url, gateway_body)
                    cpu_before = cpu_seconds(gateway.process.pid)
                    rate, done = asyncio.run(_load(url, body, streams, RUN_S))
                    rates[side].append(rate)
                    if side == "gateway":
                        gateway_cpu += cpu_seconds(gateway.process.pid) - cpu_before
                        gateway_requests += done
            # Load-independent view of the same cost: the gateway's own CPU time per relayed request.
            results[f"gateway_cpu_ms_per_request_{streams}"] = round(gateway_cpu * 1000 / max(gateway_requests, 1), 2)
            ratios = [g / d for g, d in zip(rates["gateway"], rates["direct"], strict=True)]
            results[f"direct_rps_{streams}"] = round(statistics.median(rates["direct"]), 2)
            results[f"gateway_rps_{streams}"] = round(statistics.median(rates["gateway"]), 2)
            results[f"gateway_throughput_ratio_{streams}"] = round(statistics.median(ratios), 3)
        results["gateway_rss_mb"] = round(peak_rss_mb(gateway.process.pid), 1)
        one = {"max_tokens": 1, "stream": False, **sampling, "min_tokens": 1}
        direct_p50, gateway_p50 = asyncio.run(
            _latencies((direct_url, {**direct_body, **one}), (gateway_url, {**gateway_body, **one}))
        )
        results["direct_p50_ms"] = round(direct_p50, 2)
        results["gateway_added_p50_ms"] = round(gateway_p50 - direct_p50, 2)
    return results
