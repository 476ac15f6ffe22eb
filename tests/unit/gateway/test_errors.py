"""The error catalogue: one body shape, each code's status and metric, and the gateway's own OpenAI answers."""

from __future__ import annotations

import json

import pytest

from fleetops.metrics import MetricName
from gateway import openai_wire as wire
from gateway.errors import ErrorCode, GatewayError
from gateway.metrics import GatewayMetrics
from gateway.openai_wire import error_response


def test_the_body_is_code_message_then_details_with_the_codes_status() -> None:
    metrics = GatewayMetrics()
    error = GatewayError(
        ErrorCode.UNKNOWN_ADAPTER, "unknown adapter 'x'; valid adapters: base", valid_adapters=["base"]
    )

    response = error_response(error, metrics)

    assert response.status_code == 400
    assert response.body == (
        b'{"error":{"code":"unknown_adapter","message":"unknown adapter \'x\'; valid adapters: base",'
        b'"valid_adapters":["base"]}}'
    )
    assert metrics.drain().counters[MetricName.CLIENT_ERRORS] == 1.0


@pytest.mark.parametrize(
    ("code", "status", "counted"),
    [
        (ErrorCode.PAYLOAD_TOO_LARGE, 413, MetricName.CLIENT_ERRORS),
        (ErrorCode.DEADLINE_EXCEEDED, 504, MetricName.REQUEST_ERRORS),
        (ErrorCode.DRAINING, 503, None),
        (ErrorCode.ENGINE_UNAVAILABLE, 503, None),
    ],
)
def test_each_code_answers_its_status_and_counts_its_metric(
    code: ErrorCode, status: int, counted: MetricName | None
) -> None:
    metrics = GatewayMetrics()

    response = error_response(GatewayError(code), metrics)

    assert response.status_code == status
    assert json.loads(bytes(response.body)) == {"error": {"code": code.value, "message": code.default_message}}
    assert {name for name, value in metrics.drain().counters.items() if value} == ({counted} if counted else set())


def test_every_client_error_counts_in_client_errors_and_codes_are_unique() -> None:
    assert all(code.metric is MetricName.CLIENT_ERRORS for code in ErrorCode if code.status < 500)
    assert len({code.value for code in ErrorCode}) == len(ErrorCode)


def test_the_gateways_own_answers_have_the_engines_shape() -> None:
    backend = {"version": "fallback", "adapter": None, "fallback_reason": "engine_oom"}

    answer = wire.completion("jp_style", "Sorry", wire.FINISH_FALLBACK, backend)
    events = wire.last_events("jp_style", "", wire.FINISH_DEADLINE, {"version": "v7", "adapter": "jp_style"})

    assert answer["object"] == "chat.completion" and answer["backend"] == backend
    assert answer["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "Sorry"}, "finish_reason": "fallback"}
    ]
    first, done = events.decode().removesuffix("\n\n").split("\n\n")
    chunk = json.loads(first.removeprefix("data: "))
    assert done == "data: [DONE]"
    assert chunk["object"] == "chat.completion.chunk" and chunk["backend"]["version"] == "v7"
    assert chunk["choices"] == [{"index": 0, "delta": {"content": ""}, "finish_reason": "deadline_exceeded"}]


def test_the_backend_note_goes_in_front_without_reparsing() -> None:
    note = b'{"version":"v7","adapter":"base"}'

    assert wire.with_backend(b'{"id":"1","choices":[{}]}', note) == b'{"backend":' + note + b',"id":"1","choices":[{}]}'
    assert wire.with_backend_in_first_event(b'data: {"id":"1"}\n\ndata: {"id":"1"}\n\n', note) == (
        b'data: {"backend":' + note + b',"id":"1"}\n\ndata: {"id":"1"}\n\n'
    )
    assert wire.chat_request({"temperature": 0.2}, "base", [], 8, stream=True) == (
        b'{"temperature": 0.2, "model": "base", "messages": [], "max_tokens": 8, "stream": true}'
    )
