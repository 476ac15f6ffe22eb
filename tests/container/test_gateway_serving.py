"""The gateway in front of the real CPU engine: ping, plain and streamed invocations, routing, budget, bad input."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest

from devtools.local_serving import EngineHandle, GatewayHandle, default_max_model_len, engine_totals, sse_data

pytestmark = pytest.mark.container

MAX_MODEL_LEN = default_max_model_len()  # gpu_container/config/gateway.yaml


def chat(text: str, **extra: object) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": 8, "temperature": 0, **extra}


def long_history(turns: int, words: int = 60) -> list[dict[str, str]]:
    history = []
    for i in range(turns):
        history.append(
            {"role": "user", "content": f"turn {i}: " + "which manga volume ships next week " * (words // 6)}
        )
        history.append(
            {"role": "assistant", "content": f"answer {i}: " + "the latest chapter releases " * (words // 4)}
        )
    return history


def test_ping_is_fast_and_does_not_touch_the_engine(gateway: GatewayHandle) -> None:
    with httpx.Client() as client:
        client.get(f"{gateway.url}/ping")  # connection set-up
        started = time.perf_counter()
        statuses = [client.get(f"{gateway.url}/ping").status_code for _ in range(50)]
        per_ping_ms = (time.perf_counter() - started) * 1000 / 50
    assert statuses == [200] * 50
    assert per_ping_ms < 50, f"/ping took {per_ping_ms:.1f} ms on average; SageMaker allows 2 s, we aim for ms"


def test_the_collector_skips_what_start_up_built(gateway: GatewayHandle) -> None:
    """Once the server listens its start-up objects are frozen (gateway.heap): the collector's passes, which stop
    every stream while they run, walk only what requests made since."""
    frozen = re.search(r"start-up heap frozen \((\d+) objects\)", gateway.process.stderr())
    assert frozen is not None and int(frozen.group(1)) > 10_000


def test_plain_invocation_names_backend_version_and_adapter(gateway: GatewayHandle) -> None:
    response = httpx.post(f"{gateway.url}/invocations", json=chat("おすすめの漫画は?", locale="ja-JP"), timeout=60)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["backend"] == {"version": "tiny-llama-test", "adapter": "jp_style"}
    assert body["model"] == "jp_style"  # vLLM itself says which LoRA produced the answer
    assert response.headers["x-backend-version"] == "tiny-llama-test"
    assert response.headers["x-adapter"] == "jp_style"
    assert body["choices"][0]["message"]["content"]
    # The gateway's own count (its tokenizer + chat template) is exactly what the engine counted.
    assert int(response.headers["x-prompt-tokens"]) == body["usage"]["prompt_tokens"]


def test_streaming_invocation_passes_tokens_through_and_names_the_adapter(gateway: GatewayHandle) -> None:
    with httpx.stream(
        "POST", f"{gateway.url}/invocations", json=chat("where is my order", intent="order_status", stream=True),
        timeout=60,
    ) as response:  # fmt: skip
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-adapter"] == "general_support"
        text = response.read().decode()
    events = sse_data(text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["backend"] == {"version": "tiny-llama-test", "adapter": "general_support"}
    assert {c["model"] for c in chunks} == {"general_support"}
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) >= 1
    assert chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop")


def test_adapters_really_change_the_answer(gateway: GatewayHandle) -> None:
    answers = {}
    for adapter in ("base", "manga_domain", "general_support", "jp_style"):
        response = httpx.post(f"{gateway.url}/invocations", json=chat("hello", adapter=adapter), timeout=60)
        assert response.status_code == 200, response.text
        assert response.json()["backend"]["adapter"] == adapter
        answers[adapter] = response.json()["choices"][0]["message"]["content"]
    assert len(set(answers.values())) == 4, answers


def test_the_openai_routes_are_served(gateway: GatewayHandle) -> None:
    models = httpx.get(f"{gateway.url}/v1/models", timeout=30)
    assert models.status_code == 200
    assert {"base", "manga_domain", "general_support", "jp_style"} <= {m["id"] for m in models.json()["data"]}
    payload = {"model": "manga_domain", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    completion = httpx.post(f"{gateway.url}/v1/chat/completions", json=payload, timeout=60)
    assert completion.status_code == 200
    assert completion.json()["model"] == "manga_domain"
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json={**payload, "stream": True}) as streamed:
        assert sse_data(streamed.read().decode())[-1] == "[DONE]"


def test_long_session_is_trimmed_with_marker_and_fits_the_model(gateway: GatewayHandle) -> None:
    payload = {**chat("and the next volume?", max_tokens=256), "history": long_history(40)}
    response = httpx.post(f"{gateway.url}/invocations", json=payload, timeout=60)
    assert response.status_code == 200, response.text
    dropped = int(response.headers["x-dropped-turns"])
    usage = response.json()["usage"]
    assert dropped > 0, "40 long turns must not fit the history budget"
    assert usage["prompt_tokens"] == int(response.headers["x-prompt-tokens"])
    assert usage["prompt_tokens"] + 256 <= MAX_MODEL_LEN
    # Turn after turn the cut point stays put and jumps only at checkpoints (prefix-cache friendly).
    cuts = []
    for turns in range(30, 40):
        body = {**chat("and the next volume?"), "history": long_history(turns)}
        cuts.append(int(httpx.post(f"{gateway.url}/invocations", json=body, timeout=60).headers["x-dropped-turns"]))
    assert cuts == sorted(cuts)
    assert len(set(cuts)) <= 4, cuts  # a slide by one turn every turn would give 10 different cut points


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b'{"messages": [{"role": "user", "content": "hi"}', 400, "invalid_json"),
        (b"not json at all", 400, "invalid_json"),
        (b'{"max_tokens": 5}', 400, "invalid_request"),
        (b'{"messages": [{"role": "user", "content": 42}]}', 400, "invalid_request"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}', 400, "invalid_request"),
        (b'{"messages": [{"role": "robot", "content": "hi"}]}', 400, "invalid_request"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000}', 400, "max_tokens_too_large"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "adapter": "klingon"}', 400, "unknown_adapter"),
        (b'{"messages": [{"role": "assistant", "content": "hi"}]}', 400, "no_question"),
    ],
)
def test_bad_input_gets_a_clear_4xx_at_once(gateway: GatewayHandle, body: bytes, status: int, code: str) -> None:
    started = time.perf_counter()
    response = httpx.post(f"{gateway.url}/invocations", content=body, timeout=10)
    elapsed = time.perf_counter() - started
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]  # what the user sees, e.g. "unknown adapter 'klingon'; valid adapters: base, ..."
    assert elapsed < 1.0


def test_unknown_adapter_lists_the_valid_ones(gateway: GatewayHandle) -> None:
    response = httpx.post(f"{gateway.url}/invocations", json=chat("hi", adapter="klingon"), timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["valid_adapters"] == ["base", "general_support", "jp_style", "manga_domain"]
    assert "valid adapters: base, general_support, jp_style, manga_domain" in response.json()["error"]["message"]


def test_body_over_the_payload_limit_is_413(gateway: GatewayHandle) -> None:
    huge = json.dumps(chat("x" * (1024 * 1024))).encode()  # just over server.max_body_bytes (1 MiB)
    response = httpx.post(f"{gateway.url}/invocations", content=huge, timeout=30)
    assert response.status_code == 413
    error = response.json()["error"]
    assert (error["code"], error["limit"]) == ("payload_too_large", 1024 * 1024)
    assert "1048576-byte limit" in error["message"]


def test_oversized_prompt_and_context_are_refused_not_cut(gateway: GatewayHandle) -> None:
    question = "tell me about every manga volume " * 400  # far beyond max_model_len on its own
    response = httpx.post(f"{gateway.url}/invocations", json=chat(question), timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "prompt_too_large"
    context = ["the store sells many manga volumes " * 200]
    response = httpx.post(f"{gateway.url}/invocations", json=chat("hi", retrieved_context=context), timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_too_large"


def test_engine_stays_healthy_after_bad_input(gateway: GatewayHandle) -> None:
    for body in (b"{", b'{"messages": []}', b'{"messages": [{"role": "user", "content": "hi"}], "temperature": -5}'):
        assert httpx.post(f"{gateway.url}/invocations", content=body, timeout=30).status_code == 400
    assert gateway.ping() == 200
    assert httpx.post(f"{gateway.url}/invocations", json=chat("still there?"), timeout=60).status_code == 200


def test_emits_emf_metrics_with_endpoint_and_variant(gateway: GatewayHandle) -> None:
    httpx.post(f"{gateway.url}/invocations", json=chat("count me"), timeout=60)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and gateway.metric_total("Requests") < 1:
        time.sleep(0.5)
    lines = gateway.emf_lines()
    assert lines, gateway.process.stdout()[-2000:]
    main = [line for line in lines if "Requests" in line]
    assert main[-1]["EndpointName"] == "manga-chat-local"
    assert main[-1]["VariantName"] == "primary"
    assert gateway.metric_total("Requests") >= 1
    assert any("TimeToFirstTokenMs" in line or "RequestLatencyMs" in line for line in lines)


def test_a_client_that_leaves_mid_stream_frees_the_engine(gateway: GatewayHandle, vllm_engine: EngineHandle) -> None:
    body = chat("a long story", max_tokens=512, min_tokens=128, stream=True)
    with httpx.stream("POST", f"{gateway.url}/invocations", json=body, timeout=60) as response:
        next(response.iter_raw())  # the answer has started ...
    left = time.monotonic()  # ... and the client hangs up
    while engine_totals(vllm_engine.base_url)["vllm:num_requests_running"] > 0:
        assert time.monotonic() - left < 2.0, "the engine kept generating for a client that left"
        time.sleep(0.05)
    assert "Exception in ASGI application" not in gateway.process.stderr()
    assert httpx.post(f"{gateway.url}/invocations", json=chat("next"), timeout=60).status_code == 200
