"""SIGTERM drain: new work gets 503, /ping 503, the in-flight streams finish, the gateway exits 0."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from devtools.local_serving import LONG_ANSWER_BUDGET, EngineHandle, sse_data, start_gateway
from devtools.tiny_model import TinyModel

pytestmark = pytest.mark.container

# The tiny model streams ~100-200 tokens/s per stream: long answers are still running at SIGTERM.
# Long answers on purpose: min_tokens (raised with the answer cap) keeps each stream going for seconds, but not for
# longer than the widest drain window allows on a loaded machine (4 x 1600 tokens took over 20 s at load 10).
ANSWER_TOKENS = 800
OVERRIDES = {"drain": {"window_s": 22}, "budget": LONG_ANSWER_BUDGET, "limits": {"min_tokens": ANSWER_TOKENS}}
HELLO = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
STREAMS = 4
CONTENT = b'"delta":{"content":'


@dataclass
class Stream:
    status: int = 0
    body: bytearray = field(default_factory=bytearray)
    error: str = ""
    under_way: threading.Event = field(default_factory=threading.Event)  # status known and content flowing

    def report(self) -> str:
        return f"HTTP {self.status} {self.error} body[:600]={bytes(self.body[:600])!r}"


async def _read(url: str, index: int, stream: Stream) -> None:
    body = {"messages": [{"role": "user", "content": f"a long story please ({index})"}], "max_tokens": ANSWER_TOKENS,
            "min_tokens": ANSWER_TOKENS, "stream": True}  # fmt: skip
    try:
        async with httpx.AsyncClient(timeout=60) as client, client.stream("POST", url, json=body) as response:
            stream.status = response.status_code
            async for chunk in response.aiter_raw():
                stream.body += chunk
                if response.status_code != 200 or CONTENT in stream.body:
                    stream.under_way.set()
    except Exception as exc:  # reported by the assertions below, with what was received
        stream.error = repr(exc)
    finally:
        stream.under_way.set()


def test_sigterm_drains_in_flight_streams_then_exits_zero(
    tiny_model: TinyModel, vllm_engine: EngineHandle, tmp_path: Path
) -> None:
    with start_gateway(tiny_model, tmp_path, engine_url=vllm_engine.base_url, overrides=OVERRIDES) as gw:
        streams = [Stream() for _ in range(STREAMS)]

        async def read_all() -> None:
            await asyncio.gather(*(_read(f"{gw.url}/invocations", i, s) for i, s in enumerate(streams)))

        # One event loop reads every stream, so no reader thread can lag behind the others.
        reader = threading.Thread(target=asyncio.run, args=(read_all(),))
        reader.start()
        assert all(s.under_way.wait(60) for s in streams)
        for s in streams:
            assert s.status == 200 and not s.error and b"[DONE]" not in s.body, s.report()  # running at SIGTERM
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
        reader.join(60)
        assert gw.process.popen.wait(timeout=40) == 0
    for s in streams:
        events = sse_data(s.body.decode())
        assert events and events[-1] == "[DONE]", s.report()
        assert json.loads(events[-2])["choices"][0]["finish_reason"] == "length", s.report()  # ran to the end
        assert sum(1 for e in events[:-1] if json.loads(e)["choices"]) >= ANSWER_TOKENS * 5 // 8  # chunks, not tokens
    stderr = gw.process.stderr()
    in_flight = int(re.search(r"draining (\d+) in flight", stderr).group(1))  # type: ignore[union-attr]
    assert in_flight == STREAMS, stderr
    assert "drain complete" in stderr
