"""The served rate's premise on a real vLLM engine: while requests wait, an instance serves as fast as it can.

``fleetops.prescale.served_capacity`` takes, over the minutes in which vLLM had 2 or more requests waiting per
instance, the median of what each served (its ``InvocationsPerInstance`` less its queue's growth), and plans with
it where it is clearly below fleet.yaml's rate. The simulator agrees with that by construction (it defines an
instance's rate so); this checks it on a real engine: the CPU vLLM server with the tiny model on one core,
``--max-num-seqs 4`` (so that its batch fills at rates one core reaches), every answer 32 tokens, driven from the
other core by open-loop Poisson arrivals in steps from light load to well past what it serves.

Compressed clock: windows of ``WINDOW_S`` seconds stand in for CloudWatch's minutes (12 to the minute: every rate
below is per second of the engine's clock, and the windows are handed over one minute apart with their counts as
a minute's). A window's arrivals are its ``InvocationsPerInstance``; the mean of the engine's
``vllm:num_requests_waiting``, sampled every ``SAMPLE_S``, its ``QueueDepth`` (what the container's metrics agent
scrapes). The project's own ``served_capacity`` decides on those windows. Keys:

- ``engine_max_rps``: completions per second over the overloaded steps, from the engine's own counter: the rate
  it really holds (the truth the served rate should find).
- ``served_rate_rps`` and ``served_rate_vs_max``: what ``served_capacity`` found, and over the truth (1.0: exact;
  above 1, the plan would count on more than an instance serves).
- ``saturated_windows`` of ``windows``; ``saturated_windows_at_light_load``: windows at the lightest step that
  read as saturated (a false reading: should be 0).
- ``arrivals_vs_max``: the median arrival rate of the windows with 2 or more waiting, over the truth: what the
  served rate would read without the queue's growth taken off (every arrival counts, served or not).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from devtools.local_serving import engine_totals, start_engine
from devtools.tiny_model import ADAPTERS, ensure_tiny_model
from fleetops.prescale.served_capacity import SATURATED_QUEUE_PER_INSTANCE, MinuteLoad, served_capacity

REPO = Path(__file__).resolve().parents[1]
MAX_NUM_SEQS = 4
ENGINE_CPU, DRIVER_CPU = 0, 1
ANSWER_TOKENS = 32
WINDOW_S = 5.0
SAMPLE_S = 0.5
CALIBRATION_S = 20.0
#: (arrival rate over the calibrated one, seconds): light, near, then past it.
STEPS = ((0.4, 40.0), (0.85, 40.0), (1.15, 100.0), (1.4, 80.0))
PROMPT = "which manga volume ships next week, and is the preorder open? 最新刊の発売日を教えてください"


@dataclass
class Window:
    step: float
    arrivals: int = 0
    waiting_samples: list[float] | None = None


def _waiting_and_done(base_url: str) -> tuple[float, float]:
    totals = engine_totals(base_url)
    return totals["vllm:num_requests_waiting"], totals["vllm:request_success_total"]


async def _ask(client: httpx.AsyncClient, url: str) -> None:
    body = {
        "model": ADAPTERS[0],
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": ANSWER_TOKENS,
        "min_tokens": ANSWER_TOKENS,
        "temperature": 0,
    }
    with contextlib.suppress(httpx.HTTPError):  # the engine's own counters are the truth here, not the answers
        await client.post(url, json=body)


async def _calibrate(base_url: str) -> float:
    """Completions per second with 4 x MAX_NUM_SEQS requests always in flight (the batch always full)."""
    url = f"{base_url}/v1/chat/completions"
    stop = time.monotonic() + CALIBRATION_S
    async with httpx.AsyncClient(timeout=120) as client:

        async def loop() -> None:
            while time.monotonic() < stop:
                await _ask(client, url)

        _, before = _waiting_and_done(base_url)
        started = time.monotonic()
        await asyncio.gather(*(loop() for _ in range(4 * MAX_NUM_SEQS)))
        _, after = _waiting_and_done(base_url)
    return (after - before) / (time.monotonic() - started)


async def _drive(base_url: str, rate: float) -> tuple[list[Window], float]:
    """Open-loop arrivals at each step's share of ``rate``; the windows, and completions/s over the steps past it."""
    url = f"{base_url}/v1/chat/completions"
    rng = random.Random(7)
    windows: list[Window] = []
    in_flight: set[asyncio.Task[None]] = set()
    over_done = over_s = 0.0
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0), limits=httpx.Limits(max_connections=1000)) as client:
        for share, seconds in STEPS:
            _, done_before = await asyncio.to_thread(_waiting_and_done, base_url)
            step_start = time.monotonic()
            for _ in range(int(seconds / WINDOW_S)):
                window = Window(share, 0, [])
                window_end = time.monotonic() + WINDOW_S
                next_sample = time.monotonic()
                next_arrival = time.monotonic() + rng.expovariate(share * rate)
                while (now := time.monotonic()) < window_end:
                    if now >= next_sample:
                        waiting, _ = await asyncio.to_thread(_waiting_and_done, base_url)
                        window.waiting_samples.append(waiting)  # type: ignore[union-attr]
                        next_sample += SAMPLE_S
                    if now >= next_arrival:
                        task = asyncio.create_task(_ask(client, url))
                        in_flight.add(task)
                        task.add_done_callback(in_flight.discard)
                        window.arrivals += 1
                        next_arrival += rng.expovariate(share * rate)
                    await asyncio.sleep(max(0.0, min(next_sample, next_arrival, window_end) - time.monotonic()))
                windows.append(window)
            if share > 1:
                _, done_after = await asyncio.to_thread(_waiting_and_done, base_url)
                over_done += done_after - done_before
                over_s += time.monotonic() - step_start
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
    return windows, over_done / over_s


def _loads(windows: list[Window]) -> list[MinuteLoad]:
    """The windows as CloudWatch's minutes: one minute apart, each window's arrivals as a minute's."""
    start = datetime(2026, 12, 4, tzinfo=UTC)
    return [
        MinuteLoad(start + i * timedelta(minutes=1), w.arrivals / 60, statistics.fmean(w.waiting_samples or [0]))
        for i, w in enumerate(windows)
    ]


def run() -> dict[str, float]:
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    # The engine on one core, the load on the other: a driver sharing the engine's cores is starved under
    # overload and sends its arrivals in bursts, which is not the traffic the served rate reads.
    os.sched_setaffinity(0, {DRIVER_CPU})
    with (
        tempfile.TemporaryDirectory() as work,
        start_engine(
            tiny, logs=Path(work), extra_args=["--max-num-seqs", str(MAX_NUM_SEQS)], cpus={ENGINE_CPU}
        ) as engine,
    ):
        calibrated = asyncio.run(_calibrate(engine.base_url))
        windows, engine_max = asyncio.run(_drive(engine.base_url, calibrated))
    loads = _loads(windows)
    per_minute = engine_max * WINDOW_S / 60  # the truth on the minutes' scale
    found = served_capacity(10 * per_minute, loads)  # a configured rate far above: only the reading matters here
    served = found.served_rps or 0.0
    arrivals = [m.invocations_per_instance_rps for m in loads if _saturated(m)]
    return {
        "calibrated_rps": round(calibrated, 3),
        "engine_max_rps": round(engine_max, 3),
        "served_rate_rps": round(served * 60 / WINDOW_S, 3),
        "served_rate_vs_max": round(served / per_minute, 3),
        "arrivals_vs_max": round(statistics.median(arrivals) / per_minute, 3) if arrivals else -1.0,
        "saturated_windows": float(found.saturated_minutes),
        "windows": float(len(windows)),
        "saturated_windows_at_light_load": float(
            sum(1 for w, m in zip(windows, loads, strict=True) if w.step == STEPS[0][0] and _saturated(m))
        ),
        "window_s": WINDOW_S,
    }


def _saturated(load: MinuteLoad) -> bool:
    return load.queue_per_instance >= SATURATED_QUEUE_PER_INSTANCE
