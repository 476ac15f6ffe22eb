"""The request log: id validation, the record's fields and outcome, the per-adapter counts, and no text in it."""

from __future__ import annotations

import io
import json
import time
from collections.abc import AsyncIterator

import pytest
from starlette.responses import JSONResponse, Response

from fleetops.metrics import MetricName
from gateway.metrics import GatewayMetrics
from gateway.relay import RelayResponse
from gateway.request_log import EngineTimings, RequestLog, RequestTrace, request_id, safe_session_id


@pytest.mark.parametrize("given", ["a", "chat-42", "A1.b_c:d-e", "x" * 128, "0f8e6c1a-2b3c-4d5e-8f90-123456789abc"])
def test_a_plain_bounded_id_is_honoured(given: str) -> None:
    assert request_id({"x-request-id": given}) == given


@pytest.mark.parametrize(
    "given", ["", "x" * 129, "has space", "new\nline", 'quote"', "-leading-dash", "ünïcode", "a/b"]
)
def test_anything_else_is_replaced_by_a_generated_id(given: str) -> None:
    replaced = request_id({"x-request-id": given})
    assert replaced != given
    assert len(replaced) == 32 and int(replaced, 16) >= 0


def test_generated_ids_differ_and_sagemakers_id_is_the_fallback() -> None:
    assert request_id({}) != request_id({})
    assert request_id({"x-amzn-sagemaker-inference-id": "inf-1"}) == "inf-1"
    assert request_id({"x-request-id": "mine", "x-amzn-sagemaker-inference-id": "inf-1"}) == "mine"


def test_a_session_id_that_is_free_text_is_not_logged() -> None:
    assert safe_session_id("sess-42") == "sess-42"
    assert safe_session_id("Aiko Tanaka, 3-1 Shibuya") is None


def _log() -> tuple[RequestLog, io.StringIO, GatewayMetrics]:
    out, metrics = io.StringIO(), GatewayMetrics()
    return RequestLog("v7", "prompt-2026-11", metrics, out), out, metrics


def _trace(**fields: object) -> RequestTrace:
    trace = RequestTrace("req-1", 0.0)
    for name, value in fields.items():
        setattr(trace, name, value)
    return trace


def test_a_plain_answer_splits_latency_with_the_engines_timings() -> None:
    trace = RequestTrace("req-1", started=time.perf_counter() - 1.0)  # arrived a second ago
    trace.answered(12, EngineTimings(queue_ms=30.0, prefill_ms=20.0, generation_ms=400.0))
    assert trace.latency_ms is not None and trace.latency_ms == pytest.approx(1000, abs=50)
    assert trace.queue_wait_ms == 30.0 and trace.generation_ms == 400.0
    assert trace.ttft_ms == pytest.approx(trace.latency_ms - 400.0)


def test_a_stream_splits_latency_at_its_first_token() -> None:
    trace = _trace(ttft_ms=120.0, stream=True)
    trace.answered(5)
    assert trace.generation_ms == pytest.approx((trace.latency_ms or 0) - 120.0)


def test_the_line_has_every_field_and_no_text() -> None:
    log, out, _ = _log()
    trace = _trace(adapter="jp_style", session_id="s-1", tokens_in=91, tokens_out=12, dropped_turns=2, ttft_ms=80.0)
    log.finish(trace, Response(b'{"choices":[{"message":{"content":"secret answer"}}]}', 200))
    (line,) = out.getvalue().splitlines()
    record = json.loads(line)
    assert set(record) == {
        "log_type", "request_id", "session_id", "adapter", "model_version", "prompt_version", "stream", "status",
        "outcome", "error_code", "fallback_reason", "engine_death_cause", "tokens_in", "tokens_out", "dropped_turns",
        "queue_wait_ms", "ttft_ms", "generation_ms", "latency_ms",
    }  # fmt: skip
    assert (record["request_id"], record["model_version"], record["prompt_version"]) == (
        "req-1",
        "v7",
        "prompt-2026-11",
    )
    assert (record["adapter"], record["tokens_in"], record["dropped_turns"], record["outcome"]) == (
        "jp_style",
        91,
        2,
        "ok",
    )
    assert "secret" not in line


@pytest.mark.parametrize(
    ("response", "outcome", "code", "reason"),
    [
        (
            JSONResponse({"error": {"code": "unknown_adapter", "message": "x"}}, 400),
            "client_error",
            "unknown_adapter",
            None,
        ),
        (JSONResponse({"error": {"message": "bad temperature", "code": 400}}, 400), "client_error", "400", None),
        (JSONResponse({}, 200, {"X-Gateway-Fallback": "engine_oom"}), "fallback", None, "engine_oom"),
        (JSONResponse({"error": {"code": "deadline_exceeded"}}, 504), "deadline", "deadline_exceeded", None),
        (JSONResponse({"error": {"code": "draining"}}, 503), "unavailable", "draining", None),
        (JSONResponse({"id": "x"}, 200), "ok", None, None),
    ],
)
def test_outcomes(response: Response, outcome: str, code: str | None, reason: str | None) -> None:
    log, _, _ = _log()
    record = log.record(_trace(), response)
    assert (record["outcome"], record["error_code"], record["fallback_reason"]) == (outcome, code, reason)


def test_the_answer_carries_the_id_and_counts_under_its_adapter() -> None:
    log, _, metrics = _log()
    ok = log.finish(
        _trace(adapter="a", tokens_in=5, latency_ms=900.0, ttft_ms=100.0, tokens_out=3), Response(b"{}", 200)
    )
    fell_back = log.finish(_trace(adapter="a"), JSONResponse({}, 200, {"X-Gateway-Fallback": "engine_error"}))
    log.finish(_trace(), JSONResponse({"error": {"code": "invalid_json"}}, 400))  # before routing: no adapter
    assert ok.headers["X-Request-Id"] == fell_back.headers["X-Request-Id"] == "req-1"
    by_adapter = metrics.drain().by_adapter
    assert set(by_adapter) == {"a"}
    counters, observed = by_adapter["a"].counters, by_adapter["a"].observations
    assert (counters[MetricName.REQUESTS], counters[MetricName.FALLBACKS], counters[MetricName.REQUEST_ERRORS]) == (
        2,
        1,
        1,
    )
    assert observed[MetricName.REQUEST_LATENCY] == [900.0]  # the fallback's time is not an engine latency
    assert observed[MetricName.TIME_TO_FIRST_TOKEN] == [100.0]


def test_a_stream_is_logged_when_it_ends() -> None:
    log, out, _ = _log()

    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: {}\n\n"

    closed: list[str] = []
    relay = RelayResponse(chunks(), 200)
    relay.on_close = lambda: closed.append("drain")
    log.finish(_trace(stream=True), relay)
    assert out.getvalue() == "" and relay.headers["X-Request-Id"] == "req-1"
    assert relay.on_close is not None
    relay.on_close()
    assert closed == ["drain"] and json.loads(out.getvalue())["stream"] is True
