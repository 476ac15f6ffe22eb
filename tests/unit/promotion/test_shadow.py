"""The shadow comparison on fixed inputs: SageMaker capture records in, replays to scripted variants (a test
double for ``InvokeEndpoint``; the real path runs on the local system in test_promotion_gates.py), a verdict out."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from fleetops.promotion.reply import Reply
from fleetops.promotion.shadow import Captured, Replayed, judge_shadow, parse_capture
from fleetops.promotion.shadow_replay import replay
from fleetops.promotion.shadow_spec import ShadowSpec

SPEC = ShadowSpec(min_requests=3, min_similarity=0.6, max_error_rate=0.0, max_latency_ratio=1.5)


def record(event_id: str, question: str, answer: str, encoding: str = "JSON") -> str:
    def data(payload: dict[str, Any]) -> dict[str, str]:
        text = json.dumps(payload)
        return {
            "data": base64.b64encode(text.encode()).decode() if encoding == "BASE64" else text,
            "encoding": encoding,
        }

    chat = {"messages": [{"role": "user", "content": question}], "max_tokens": 16}
    reply = {"choices": [{"message": {"content": answer}, "finish_reason": "stop"}]}
    return json.dumps(
        {
            "captureData": {"endpointInput": data(chat), "endpointOutput": data(reply)},
            "eventMetadata": {"eventId": event_id},
        }
    )


def test_capture_records_in_either_encoding_give_the_request_and_the_answer_the_user_got() -> None:
    text = "\n".join([record("a", "Hi", "Hello"), record("b", "Yo", "Hey", "BASE64"), '{"captureData": {}}'])

    assert parse_capture(text) == [
        Captured("a", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16}, "Hello"),
        Captured("b", {"messages": [{"role": "user", "content": "Yo"}], "max_tokens": 16}, "Hey"),
    ]


def replayed(n: int, candidate: str | None = "Try Frieren.", seconds: float = 0.2) -> list[Replayed]:
    return [Replayed(str(i), "Try Frieren.", candidate, seconds, "Try Frieren!", 0.2) for i in range(n)]


def test_a_candidate_as_reliable_as_fast_and_close_to_the_users_answers_passes() -> None:
    result = judge_shadow(replayed(4), SPEC)

    assert result.passed and result.similarity == 1.0 and result.candidate_p95_ms == result.primary_p95_ms == 200.0
    assert result.summary == (
        "shadow passed: 4 live requests replayed: similarity to the users' answers 1.0 (min 0.6; the primary's "
        "own 0.917), errors 0 (primary 0), p95 200.0 ms (primary 200.0 ms)"
    )


@pytest.mark.parametrize(
    ("replays", "says"),
    [
        (replayed(2), "only 2 live requests captured, 3 needed"),
        (replayed(3, candidate=None), "candidate failed 3 of 3 (above 0.0%)"),
        (replayed(3, candidate="Please check our weekly releases page."), "similarity 0.24 below 0.6"),
        (replayed(3, seconds=0.5), "p95 500 ms above 1.5 x the primary's 200"),
    ],
)
def test_too_few_requests_errors_other_answers_or_a_slower_candidate_fail_naming_why(
    replays: list[Replayed], says: str
) -> None:
    result = judge_shadow(replays, SPEC)

    assert not result.passed
    assert result.summary.startswith("shadow failed: ") and says in result.summary, result.summary


def test_each_captured_request_is_replayed_to_both_variants_not_streamed() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def invoke(variant: str, body: dict[str, Any]) -> Reply:
        seen.append((variant, body))
        return Reply(200, f"{variant} answer", 0.1) if variant == "primary" else Reply(500, None, 0.3, "engine died")

    captured = [Captured("e1", {"messages": [{"role": "user", "content": "Hi"}], "stream": True}, "Hello")]

    [result] = replay(invoke, captured, candidate="canary", primary="primary")

    assert result == Replayed("e1", "Hello", None, 0.3, "primary answer", 0.1)
    assert sorted(v for v, _ in seen) == ["canary", "primary"] and all(b["stream"] is False for _, b in seen)
