"""SIGTERM drain: new work gets 503, /ping 503, the in-flight stream finishes, the gateway exits 0."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from devtools.local_serving import EngineHandle, start_gateway
from devtools.tiny_model import TinyModel

pytestmark = pytest.mark.container

# The tiny model streams ~200 tokens/s: allow long answers so the stream is still running at SIGTERM.
OVERRIDES = {"drain": {"window_s": 20}, "budget": {"max_tokens_limit": 1600}}


HELLO = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
STREAMS = 6  # several long streams, so some are surely still running when SIGTERM lands on a busy host


def test_sigterm_drains_in_flight_streams_then_exits_zero(
    tiny_model: TinyModel, vllm_engine: EngineHandle, tmp_path: Path
) -> None:
    with start_gateway(tiny_model, tmp_path, engine_url=vllm_engine.base_url, overrides=OVERRIDES) as gw:
        received: list[list[bytes]] = [[] for _ in range(STREAMS)]
        started = [threading.Event() for _ in range(STREAMS)]

        def stream(index: int) -> None:
            body = {"messages": [{"role": "user", "content": f"a long story please ({index})"}], "max_tokens": 1600,
                    "ignore_eos": True, "stream": True}  # fmt: skip
            with httpx.stream("POST", f"{gw.url}/invocations", json=body, timeout=60) as response:
                for chunk in response.iter_raw():
                    received[index].append(chunk)
                    started[index].set()
                    time.sleep(0.01)  # leave the GIL to the main thread's checks; the bytes wait in the socket

        workers = [threading.Thread(target=stream, args=(i,)) for i in range(STREAMS)]
        for worker in workers:
            worker.start()
        assert all(event.wait(60) for event in started)  # every stream is under way
        assert gw.process.alive(), gw.process.stderr()[-2000:]
        gw.process.popen.send_signal(signal.SIGTERM)
        # One client, one kept-alive connection: both checks go out at once after the signal lands.
        with httpx.Client(timeout=5) as client:
            deadline = time.monotonic() + 2  # the signal is delivered asynchronously
            while (new_work := client.post(f"{gw.url}/invocations", json=HELLO)).status_code != 503:
                assert time.monotonic() < deadline, new_work.text
            ping = client.get(f"{gw.url}/ping")
        assert new_work.json()["error"]["code"] == "draining"
        assert ping.status_code == 503
        assert ping.json() == {"status": "draining"}
        for worker in workers:
            worker.join(60)
        assert gw.process.popen.wait(timeout=40) == 0
    for chunks in received:
        events = [line[6:] for line in b"".join(chunks).decode().splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        assert json.loads(events[-2])["choices"][0]["finish_reason"] == "length"  # ran to the end, not cut
        assert sum(1 for e in events[:-1] if json.loads(e)["choices"]) >= 1000
    stderr = gw.process.stderr()
    in_flight = int(re.search(r"draining (\d+) in flight", stderr).group(1))  # type: ignore[union-attr]
    assert in_flight >= 1, stderr
    assert "drain complete" in stderr
