"""Containment: the OOM answer (a test double: no CUDA here), the 60 s cut-off, and start-up refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from devtools.emulator import free_port
from devtools.local_serving import (
    LONG_ANSWER_BUDGET,
    PYTHONPATH,
    EngineHandle,
    engine_totals,
    sse_data,
    start_gateway,
)
from devtools.tiny_model import TinyModel
from gateway.config import DEFAULT_CONFIG, load_gateway_config

pytestmark = pytest.mark.container

#: What a CUDA OOM looks like when it reaches vLLM's HTTP layer (torch's message inside a 500).
CUDA_OOM_BODY = {
    "error": {
        "message": "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 22.19 GiB total capacity; "
        "19.87 GiB already allocated; 1.02 GiB free)",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }
}

#: The last message of a summary call (the window slides in these tests, so they reach the engine double too).
SUMMARY_INSTRUCTION = load_gateway_config(DEFAULT_CONFIG).summary.instruction


class OomEngineDouble:
    """TEST DOUBLE of the engine's out-of-memory answer: a CPU engine cannot run out of GPU memory.

    Healthy, answers warm-up (max_tokens 1) normally, and answers every real request with the 500 a
    CUDA OOM produces. Records what the gateway sent.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.port = free_port()

        async def health(request: Request) -> Response:
            return Response(b"", 200)

        async def chat(request: Request) -> Response:
            body = json.loads(await request.body())
            if body.get("max_tokens") == 1:
                return JSONResponse({"id": "warm", "object": "chat.completion", "choices": [], "usage": {}})
            self.requests.append(body)
            return JSONResponse(CUDA_OOM_BODY, 500)

        app = Starlette(routes=[Route("/health", health), Route("/v1/chat/completions", chat, methods=["POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> OomEngineDouble:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def conversation(turns: int) -> list[dict[str, str]]:
    return [
        {"role": role, "content": f"{role} {i}: " + "about the new shonen volume " * 20}
        for i in range(turns)
        for role in ("user", "assistant")
    ]


def test_oom_gets_one_compressed_retry_then_the_fallback_and_a_metric(tiny_model: TinyModel, workdir: Path) -> None:
    with (
        OomEngineDouble() as double,
        start_gateway(tiny_model, workdir, engine_url=f"http://127.0.0.1:{double.port}") as gw,
    ):
        body = {"messages": [{"role": "user", "content": "and volume 4?"}], "history": conversation(12)}
        response = httpx.post(f"{gw.url}/invocations", json=body, timeout=30)
        assert response.status_code == 200
        assert response.headers["x-gateway-fallback"] == "engine_oom"
        answer = response.json()
        assert answer["choices"][0]["finish_reason"] == "fallback"
        assert answer["choices"][0]["message"]["content"].startswith("Sorry, the assistant is busy")
        # The window slid: the summary call met the out-of-memory engine too, and the marker stood in for it.
        summaries = [r for r in double.requests if r["messages"][-1]["content"] == SUMMARY_INSTRUCTION]
        assert len(summaries) == 1
        first, retry = [r for r in double.requests if r not in summaries]  # exactly one retry
        assert first["messages"][1]["content"].endswith("earlier turns omitted]")
        assert len(retry["messages"]) < len(first["messages"])  # ... with a compressed context
        assert retry["messages"][0] == first["messages"][0]  # the system prompt is always kept
        assert retry["messages"][-1] == first["messages"][-1]  # and so is the question

        streamed = httpx.post(f"{gw.url}/invocations", json={**body, "stream": True}, timeout=30)
        events = sse_data(streamed.text)
        assert events[-1] == "[DONE]"
        assert json.loads(events[0])["backend"]["fallback_reason"] == "engine_oom"

        deadline = time.monotonic() + 10
        while gw.metric_total("OomCaught") < 4 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert gw.metric_total("OomCaught") == 4  # two requests x (first try + retry)
        assert gw.metric_total("Fallbacks") == 2


def test_an_engine_out_of_reach_is_never_named_in_an_answer(tiny_model: TinyModel, workdir: Path) -> None:
    """The connection error names the engine's address (``Cannot connect to host 127.0.0.1:<port>``); a client
    must get the documented answer without it."""
    with OomEngineDouble() as double:
        url = f"http://127.0.0.1:{double.port}"
        with start_gateway(tiny_model, workdir, engine_url=url) as gw:
            double.__exit__()  # its port closes: the next connection is refused, before the health check notices
            models = httpx.get(f"{gw.url}/v1/models", timeout=30)
            question = {"messages": [{"role": "user", "content": "still there?"}]}
            answer = httpx.post(f"{gw.url}/invocations", json=question, timeout=30)
    assert (models.status_code, models.json()["error"]["code"]) == (503, "engine_unavailable"), models.text
    assert (answer.status_code, answer.headers["x-gateway-fallback"]) == (200, "engine_unavailable"), answer.text
    for response in (models, answer):
        assert "127.0.0.1" not in response.text and f":{double.port}" not in response.text, response.text


def test_a_request_past_the_deadline_is_cut_off_cleanly(
    tiny_model: TinyModel, vllm_engine: EngineHandle, workdir: Path
) -> None:
    # ~1600 tokens take the tiny CPU model several seconds: well past a 3 s deadline.
    overrides: dict[str, dict[str, Any]] = {
        "breaker": {"request_deadline_s": 3.0},
        "budget": LONG_ANSWER_BUDGET,
        "limits": {"min_tokens": 1600},
    }
    long_answer = {
        "messages": [{"role": "user", "content": "tell me everything"}],
        "max_tokens": 1600,
        "min_tokens": 1600,
    }
    with start_gateway(tiny_model, workdir, engine_url=vllm_engine.base_url, overrides=overrides) as gw:
        streamed = httpx.post(f"{gw.url}/invocations", json={**long_answer, "stream": True}, timeout=30)
        events = sse_data(streamed.text)
        assert events[-1] == "[DONE]", streamed.text[:500]
        assert json.loads(events[-2])["choices"][0]["finish_reason"] == "deadline_exceeded"
        assert len(events) > 3  # tokens that made it in time were delivered
        wait_idle(vllm_engine)  # the cut stream was aborted in the engine too

        started = time.perf_counter()
        response = httpx.post(f"{gw.url}/invocations", json=long_answer, timeout=30)
        # Cut at the deadline, not after the ~1600 tokens (on a busy shared host the loop may lag a little).
        assert time.perf_counter() - started < 15
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "deadline_exceeded"
        wait_idle(vllm_engine)

        short = httpx.post(f"{gw.url}/invocations", json={**long_answer, "max_tokens": 2, "min_tokens": 0}, timeout=30)
        assert short.status_code == 200  # the engine is fine afterwards


def wait_idle(engine: EngineHandle, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if engine_totals(engine.base_url)["vllm:num_requests_running"] == 0:
            return
        time.sleep(0.2)
    raise AssertionError("the engine is still busy")


def test_mismatched_adapters_refuse_to_start_with_a_clear_error(tiny_model: TinyModel, workdir: Path) -> None:
    adapters = workdir / "adapters"
    adapters.mkdir()
    for name, path in tiny_model.adapters.items():
        os.symlink(path, adapters / name)
    assert tiny_model.mismatched_adapter is not None
    os.symlink(tiny_model.mismatched_adapter, adapters / "mismatched_rank")
    overrides = {"routing": {"adapters": [*tiny_model.adapters, "mismatched_rank"]}}
    with start_gateway(tiny_model, workdir, overrides=overrides, adapters_dir=adapters, wait_ready_s=None) as gw:
        assert gw.process.popen.wait(timeout=60) == 1
        error = gw.process.stderr()
    assert "LoRA adapters must share rank and target modules" in error
    assert "mismatched_rank: rank 4, target_modules ['k_proj', 'o_proj']" in error
    assert "manga_domain: rank 8, target_modules ['q_proj', 'v_proj']" in error


def test_entrypoint_refuses_unknown_commands(tiny_model: TinyModel, workdir: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "train"],
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "usage: python -m gateway serve" in result.stderr
