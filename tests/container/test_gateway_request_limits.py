"""One request must not tie up the engine: refused fields, exact OpenAI routes only, and a free event loop.

Against the real CPU engine: abusive fields get a 400 naming the field (and its limit) before the engine is
touched; ``/v1/..`` paths in every spelling never reach the engine's own routes; ``/ping`` keeps answering
while a 6 MB prompt is tokenised.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from devtools.local_serving import EngineHandle, GatewayHandle, engine_totals, start_gateway
from devtools.tiny_model import TinyModel

pytestmark = pytest.mark.container

QUESTION = [{"role": "user", "content": "which volume is next?"}]
GRAMMAR = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

#: (fields, code, the field named, the limit stated or None)
ABUSE: list[tuple[dict[str, Any], str, str, int | None]] = [
    ({"n": 64}, "over_limit", "n", 1),
    ({"best_of": 4}, "unsupported_field", "best_of", None),
    ({"use_beam_search": True}, "unsupported_field", "use_beam_search", None),
    ({"ignore_eos": True, "min_tokens": 100}, "unsupported_field", "ignore_eos", None),
    ({"min_tokens": 500, "max_tokens": 512}, "over_limit", "min_tokens", 128),
    ({"max_completion_tokens": 4096}, "max_tokens_too_large", "max_completion_tokens", 512),
    ({"max_tokens": 8, "max_completion_tokens": 4096}, "invalid_request", "max_completion_tokens", None),
    ({"prompt_logprobs": 5}, "unsupported_field", "prompt_logprobs", None),
    ({"logprobs": True, "top_logprobs": 20}, "over_limit", "top_logprobs", 5),
    ({"guided_regex": "a+"}, "unsupported_field", "guided_regex", None),
    ({"structured_outputs": {"regex": "a+"}}, "unsupported_field", "structured_outputs", None),
    ({"response_format": GRAMMAR}, "unsupported_field", "response_format", None),
    ({"tools": [TOOL], "tool_choice": "auto"}, "unsupported_field", "tools", None),
    ({"documents": [{"text": "x" * 100000}]}, "unsupported_field", "documents", None),
    ({"chat_template": "{{ messages }}"}, "unsupported_field", "chat_template", None),
    ({"chat_template_kwargs": {"x": 1}}, "unsupported_field", "chat_template_kwargs", None),
    ({"frobnicate": 1}, "unsupported_field", "frobnicate", None),
    ({"stop": ["a", "b", "c", "d", "e"]}, "over_limit", "stop", 4),
    ({"stream": "yes"}, "invalid_request", "stream", None),
    ({"max_tokens": "5"}, "invalid_request", "max_tokens", None),
]


@pytest.mark.parametrize("path", ["/invocations", "/v1/chat/completions"])
@pytest.mark.parametrize(("fields", "code", "field", "limit"), ABUSE, ids=[case[2] for case in ABUSE])
def test_each_abusive_field_is_refused_naming_it_before_the_engine_sees_it(
    gateway: GatewayHandle,
    vllm_engine: EngineHandle,
    path: str,
    fields: dict[str, Any],
    code: str,
    field: str,
    limit: int | None,
) -> None:
    before = engine_totals(vllm_engine.base_url)["vllm:prompt_tokens_total"]

    response = httpx.post(f"{gateway.url}{path}", json={"messages": QUESTION, **fields}, timeout=10)

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert field in error["message"]
    if limit is not None:
        assert error["limit"] == limit
        assert str(limit) in error["message"]
    assert engine_totals(vllm_engine.base_url)["vllm:prompt_tokens_total"] == before  # never reached the engine


def test_openai_chat_completions_goes_through_the_budget(gateway: GatewayHandle) -> None:
    payload = {"model": "manga_domain", "messages": QUESTION, "max_completion_tokens": 4, "temperature": 0.0}

    response = httpx.post(f"{gateway.url}/v1/chat/completions", json=payload, timeout=60)

    assert response.status_code == 200, response.text
    assert response.json()["backend"]["adapter"] == "manga_domain"
    assert int(response.headers["x-prompt-tokens"]) == response.json()["usage"]["prompt_tokens"]
    assert response.json()["usage"]["completion_tokens"] <= 4


def raw_request(port: int, method: str, target: str) -> tuple[int, bytes]:
    """Send ``target`` byte for byte (an HTTP client would normalise ``..``) and return status and body."""
    head = f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode("latin-1"))
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


TRAVERSALS = [
    "/v1/../reset_prefix_cache",
    "/v1/%2e%2e/reset_prefix_cache",
    "/v1/%2E%2E/reset_prefix_cache",
    "/v1/.%2e/reset_prefix_cache",
    "/v1/%252e%252e/reset_prefix_cache",
    "/v1/..%2freset_prefix_cache",
    "/v1/%2e%2e%2freset_prefix_cache",
    "/v1/..%5creset_prefix_cache",
    "/v1/..\\reset_prefix_cache",
    "/v1/models/../../reset_prefix_cache",
    "/v1/chat/completions/../../../reset_prefix_cache",
    "/v1/../scale_elastic_ep",
    "/v1/../tokenize",
    "/v1/completions",
    "/v1/responses",
    "/reset_prefix_cache",
]


def engine_requests(engine: EngineHandle) -> float:
    """Requests the engine's HTTP server answered (its own count; health and metrics scrapes excluded)."""
    return engine_totals(engine.base_url)["http_requests_total"]


def wait_count(engine: EngineHandle, count: float) -> None:
    deadline = time.monotonic() + 10
    while engine_requests(engine) < count:
        assert time.monotonic() < deadline, f"the engine never counted {count:g} requests"
        time.sleep(0.1)


def test_paths_outside_the_openai_routes_never_reach_the_engine(
    gateway: GatewayHandle, vllm_engine: EngineHandle
) -> None:
    before = engine_requests(vllm_engine)
    assert httpx.get(f"{gateway.url}/v1/models", timeout=30).status_code == 200
    wait_count(vllm_engine, before + 1)  # the witness: the engine counts every request it gets, unknown paths too

    answers = {f"{method} {target}": raw_request(gateway.port, method, target) for target in TRAVERSALS
               for method in ("POST", "GET")}  # fmt: skip

    assert httpx.get(f"{gateway.url}/v1/models", timeout=30).status_code == 200
    wait_count(vllm_engine, before + 2)
    assert engine_requests(vllm_engine) == before + 2  # the two /v1/models and nothing else
    for target, (status, body) in answers.items():
        assert status in (400, 404), (target, status, body)
        if status == 404:  # the gateway's own answer, not the engine's {"detail": "Not Found"}
            assert json.loads(body)["error"]["code"] == "not_found", (target, body)
    assert gateway.ping() == 200


def test_ping_answers_within_2_s_while_a_6_mb_prompt_is_tokenised(
    tiny_model: TinyModel, vllm_engine: EngineHandle, tmp_path: Path
) -> None:
    overrides = {"server": {"max_body_bytes": 6 * 1024 * 1024}}  # the cap raised to InvokeEndpoint's for this test
    with start_gateway(tiny_model, tmp_path, engine_url=vllm_engine.base_url, overrides=overrides) as gw:
        content = "which manga volume ships next week " * (6 * 1024 * 1024 // 36)
        big = json.dumps({"messages": [{"role": "user", "content": content}]}).encode()
        assert 5.9e6 < len(big) <= 6 * 1024 * 1024
        answer: dict[str, Any] = {}

        def send() -> None:
            started = time.perf_counter()
            response = httpx.post(f"{gw.url}/invocations", content=big, timeout=60)
            answer.update(status=response.status_code, body=response.json(), seconds=time.perf_counter() - started)

        sender = threading.Thread(target=send)
        pings: list[float] = []
        with httpx.Client() as client:
            client.get(f"{gw.url}/ping")  # connection set-up
            sender.start()
            while sender.is_alive():
                started = time.perf_counter()
                assert client.get(f"{gw.url}/ping", timeout=10).status_code == 200
                pings.append(time.perf_counter() - started)
                time.sleep(0.05)
        sender.join()

    assert answer["status"] == 400, answer
    assert answer["body"]["error"]["code"] == "prompt_too_large"  # it was tokenised, all 6 MB of it
    assert len(pings) >= 3, f"the big request took {answer['seconds']:.2f} s: too short to ping during it"
    assert max(pings) < 2.0, f"/ping took {max(pings):.2f} s while the big prompt was tokenised (SageMaker: 2 s)"
