"""Each answer's log line, ``X-Request-Id`` and per-adapter EMF, from the real gateway process on the CPU engine.

The session's ``gateway`` (``python -m gateway serve`` attached to the shared vLLM engine, which runs with
``--enable-per-request-metrics`` like the container's) is asked over HTTP; what it printed on stdout is read
back: the JSON request lines and the EMF lines, the latter checked against the EMF specification.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

import httpx
import pytest

from devtools.local_serving import CONTRACT, GatewayHandle
from gateway.config import DEFAULT_CONFIG, load_gateway_config
from tests.unit.gateway_metrics.emf_spec import check_emf_line

pytestmark = pytest.mark.container

PROMPT_VERSION = load_gateway_config(DEFAULT_CONFIG).system_prompt.version


def _request_lines(gateway: GatewayHandle) -> list[dict[str, Any]]:
    lines = []
    for line in gateway.process.stdout().splitlines():
        if '"log_type":"request"' in line:
            lines.append(json.loads(line))
    return lines


def _line_of(gateway: GatewayHandle, request_id: str, timeout_s: float = 10.0) -> tuple[dict[str, Any], str]:
    """The parsed log line of ``request_id`` and its raw text (a stream's is written when it ends)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for line in gateway.process.stdout().splitlines():
            if f'"request_id":"{request_id}"' in line:
                return json.loads(line), line
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line for {request_id} in {len(_request_lines(gateway))} request lines")
        time.sleep(0.2)


def _ask(question: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}], "max_tokens": 8, **extra}


def test_a_plain_answer_logs_its_adapter_versions_and_timings_never_its_text(gateway: GatewayHandle) -> None:
    secret = f"my-order-{uuid.uuid4().hex[:8]} was sent to Aiko Tanaka"
    request_id = f"test-{uuid.uuid4().hex[:12]}"
    with httpx.Client(timeout=60) as client:
        response = client.post(
            f"{gateway.url}/invocations",
            json=_ask(secret, adapter="jp_style", session_id="sess-42"),
            headers={"X-Request-Id": request_id},
        )
    assert response.status_code == 200
    assert response.headers["X-Request-Id"] == request_id
    answer_text = response.json()["choices"][0]["message"]["content"]

    record, raw = _line_of(gateway, request_id)

    assert record["adapter"] == "jp_style"
    assert record["model_version"] == CONTRACT["MODEL_VERSION"]
    assert record["prompt_version"] == PROMPT_VERSION
    assert record["session_id"] == "sess-42"
    assert (record["status"], record["outcome"], record["stream"]) == (200, "ok", False)
    assert record["tokens_in"] == int(response.headers["X-Prompt-Tokens"])
    assert record["tokens_out"] == response.json()["usage"]["completion_tokens"] > 0
    assert record["dropped_turns"] == 0
    # The engine's own per-request timings split the plain answer: queue, time to first token, decode.
    assert record["queue_wait_ms"] is not None and record["queue_wait_ms"] >= 0
    assert 0 < record["ttft_ms"] <= record["latency_ms"]
    assert record["generation_ms"] is not None
    assert record["ttft_ms"] + record["generation_ms"] == pytest.approx(record["latency_ms"], abs=0.05)
    assert secret not in raw and "Aiko" not in raw
    assert answer_text.strip() == "" or answer_text not in raw


def test_an_id_is_generated_when_none_or_a_bad_one_is_given(gateway: GatewayHandle) -> None:
    with httpx.Client(timeout=60) as client:
        plain = client.post(f"{gateway.url}/invocations", json=_ask("any new shonen?"))
        bad = client.post(
            f"{gateway.url}/invocations", json=_ask("any new shojo?"), headers={"X-Request-Id": "x" * 129}
        )
    for response in (plain, bad):
        assert response.status_code == 200
        generated = response.headers["X-Request-Id"]
        assert re.fullmatch(r"[0-9a-f]{32}", generated), generated
        record, _ = _line_of(gateway, generated)
        assert record["outcome"] == "ok"
    assert plain.headers["X-Request-Id"] != bad.headers["X-Request-Id"]


def test_streams_and_refusals_carry_the_id_and_log_a_line(gateway: GatewayHandle) -> None:
    stream_id, refused_id = f"stream-{uuid.uuid4().hex[:8]}", f"refused-{uuid.uuid4().hex[:8]}"
    with httpx.Client(timeout=60) as client:
        with client.stream(
            "POST",
            f"{gateway.url}/invocations",
            json=_ask("recommend a manga", stream=True, adapter="manga_domain"),
            headers={"X-Request-Id": stream_id},
        ) as response:
            assert response.headers["X-Request-Id"] == stream_id
            response.read()
        refused = client.post(
            f"{gateway.url}/invocations", json=_ask("hi", adapter="no_such"), headers={"X-Request-Id": refused_id}
        )
    assert refused.status_code == 400
    assert refused.headers["X-Request-Id"] == refused_id

    streamed, _ = _line_of(gateway, stream_id)
    assert (streamed["stream"], streamed["outcome"], streamed["adapter"]) == (True, "ok", "manga_domain")
    assert streamed["tokens_out"] > 0
    assert 0 < streamed["ttft_ms"] <= streamed["latency_ms"]
    refusal, _ = _line_of(gateway, refused_id)
    assert (refusal["status"], refusal["outcome"], refusal["error_code"]) == (400, "client_error", "unknown_adapter")
    assert refusal["adapter"] is None and refusal["ttft_ms"] is None


def _adapter_records(gateway: GatewayHandle, adapter: str) -> list[dict[str, Any]]:
    emf = [line for line in gateway.process.stdout().splitlines() if '"_aws"' in line]
    return [r for r in (check_emf_line(line) for line in emf) if r.get("Adapter") == adapter]


def _count(records: list[dict[str, Any]], name: str) -> int:
    values = [r[name] for r in records if name in r]
    return sum(len(v) if isinstance(v, list) else 1 for v in values)


def test_emf_carries_the_adapter_and_model_version_with_ttft_and_queue_wait(gateway: GatewayHandle) -> None:
    before = _count(_adapter_records(gateway, "general_support"), "TimeToFirstTokenMs")
    with httpx.Client(timeout=60) as client:
        for _ in range(2):
            response = client.post(f"{gateway.url}/invocations", json=_ask("where is my order?", intent="shipping"))
            assert response.headers["X-Adapter"] == "general_support"
    deadline = time.monotonic() + 20  # the test gateway flushes every 2 s
    while time.monotonic() < deadline:
        records = _adapter_records(gateway, "general_support")
        if _count(records, "TimeToFirstTokenMs") >= before + 2:
            break
        time.sleep(0.5)

    assert _count(records, "TimeToFirstTokenMs") >= before + 2
    last = records[-1]
    assert last["ModelVersion"] == CONTRACT["MODEL_VERSION"]
    assert last["EndpointName"] == "manga-chat-local"
    assert last["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [
        ["EndpointName", "VariantName", "Adapter"],
        ["EndpointName", "VariantName", "ModelVersion", "Adapter"],
    ]
    assert _count(records, "QueueWaitMs") >= 2 and _count(records, "GenerationTimeMs") >= 2
    assert sum(r.get("Requests", 0) for r in records) >= 2
