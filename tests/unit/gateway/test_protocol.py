"""The request allow-list: what is forwarded, what is refused (named, with its limit), and strict types."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway import openai_wire as wire
from gateway.config import GatewayConfig, RequestLimits
from gateway.errors import ErrorCode, GatewayError
from gateway.prompt import PromptBuilder
from gateway.protocol import REFUSED_FIELDS, SAMPLING_FIELDS, check_limits, parse_invocation

QUESTION = [{"role": "user", "content": "which volume is next?"}]


def body(**fields: Any) -> bytes:
    return json.dumps({"messages": QUESTION, **fields}).encode()


def refused(raw: bytes) -> GatewayError:
    with pytest.raises(GatewayError) as info:
        parse_invocation(raw)
    return info.value


def test_every_allowed_sampling_field_is_forwarded_as_sent() -> None:
    sampling = {
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 40,
        "min_tokens": 8,
        "stop": ["\n\n", "END"],
        "seed": 7,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "n": 1,
        "logprobs": True,
        "top_logprobs": 2,
        "stream_options": {"include_usage": True, "continuous_usage_stats": False},
        "user": "customer-42",
    }
    assert set(sampling) == SAMPLING_FIELDS  # the test covers the whole allow-list

    parsed = parse_invocation(body(**sampling, adapter="base", max_tokens=16))

    assert parsed.passthrough == sampling
    assert parsed.passthrough == parse_invocation(body(**sampling)).passthrough  # gateway fields never forwarded


def test_fields_the_client_did_not_set_are_not_forwarded() -> None:
    assert parse_invocation(body(temperature=0.0)).passthrough == {"temperature": 0.0}


@pytest.mark.parametrize("field", sorted(REFUSED_FIELDS))
def test_each_costly_vllm_field_is_refused_by_name_with_the_reason(field: str) -> None:
    error = refused(body(**{field: True}))

    assert error.code is ErrorCode.UNSUPPORTED_FIELD
    assert error.code.status == 400
    assert error.message.startswith(f"{field}: not accepted: ")
    assert error.details["fields"] == [{"field": field, "problem": f"not accepted: {REFUSED_FIELDS[field]}"}]


def test_an_unknown_field_is_refused_not_dropped_and_every_one_is_named() -> None:
    error = refused(body(frobnicate=1, vllm_xargs={"a": 1}, best_of=4))

    assert error.code is ErrorCode.UNSUPPORTED_FIELD
    assert {f["field"] for f in error.details["fields"]} == {"frobnicate", "vllm_xargs", "best_of"}
    assert "frobnicate: unknown field, not accepted" in error.message


def test_an_unknown_field_inside_a_message_is_refused_too() -> None:
    raw = json.dumps({"messages": [{"role": "user", "content": "hi", "name": "x"}]}).encode()

    error = refused(raw)

    assert error.code is ErrorCode.UNSUPPORTED_FIELD
    assert "messages.0.name: unknown field" in error.message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stream", "yes"),
        ("stream", 1),
        ("max_tokens", "5"),
        ("n", "2"),
        ("temperature", "0.5"),
        ("seed", 1.5),
        ("logprobs", "true"),
        ("stop", 5),
        ("max_completion_tokens", 5.0),
    ],
)
def test_types_are_strict(field: str, value: object) -> None:
    error = refused(body(**{field: value}))

    assert error.code is ErrorCode.INVALID_REQUEST
    assert error.details["fields"][0]["field"].split(".")[0] == field


@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature", 2.5), ("top_p", 0), ("top_k", -2), ("presence_penalty", 3), ("n", 0), ("user", "u" * 300)],
)
def test_static_ranges_are_checked_before_the_engine(field: str, value: object) -> None:
    error = refused(body(**{field: value}))

    assert error.code is ErrorCode.INVALID_REQUEST
    assert error.message.startswith(f"invalid request: {field}")


def test_different_max_tokens_and_max_completion_tokens_are_refused() -> None:
    error = refused(body(max_tokens=8, max_completion_tokens=600))

    assert error.code is ErrorCode.INVALID_REQUEST
    assert "max_tokens and max_completion_tokens differ" in error.message


@pytest.mark.parametrize(
    ("fields", "field", "limit"),
    [
        ({"n": 2}, "n", 1),
        ({"top_logprobs": 6, "logprobs": True}, "top_logprobs", 5),
        ({"min_tokens": 129}, "min_tokens", 128),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", 4),
        ({"stop": "x" * 65}, "stop", 64),
    ],
)
def test_fields_beyond_their_configured_limit_are_refused_naming_field_and_limit(
    config: GatewayConfig, fields: dict[str, Any], field: str, limit: int
) -> None:
    request = parse_invocation(body(**fields))

    with pytest.raises(GatewayError) as info:
        check_limits(request, config.limits)

    assert info.value.code is ErrorCode.OVER_LIMIT
    assert info.value.details == {"field": field, "limit": limit}
    assert info.value.message.endswith(f"the limit is {limit}")
    assert info.value.message.startswith((field, "a stop sequence"))


def test_values_at_the_limit_pass(config: GatewayConfig) -> None:
    request = parse_invocation(body(n=1, top_logprobs=5, logprobs=True, min_tokens=128, stop=["x" * 64] * 4))

    check_limits(request, config.limits)  # no error


def test_limits_come_from_the_config() -> None:
    request = parse_invocation(body(n=3))

    check_limits(request, RequestLimits(n=4))
    with pytest.raises(GatewayError, match="n is 3: the limit is 2"):
        check_limits(request, RequestLimits(n=2))


def test_max_completion_tokens_cannot_pass_the_answer_cap(builder: PromptBuilder) -> None:
    request = parse_invocation(body(max_completion_tokens=4096))

    with pytest.raises(GatewayError) as info:
        builder.build(request)

    assert info.value.code is ErrorCode.MAX_TOKENS_TOO_LARGE
    assert info.value.details == {"field": "max_completion_tokens", "limit": 512}
    assert info.value.message == "max_completion_tokens 4096 is beyond the budget: at most 512"


def test_the_engine_gets_the_budgets_max_tokens_and_never_max_completion_tokens(builder: PromptBuilder) -> None:
    request = parse_invocation(body(max_completion_tokens=32, temperature=0.0))
    built = builder.build(request)

    sent = json.loads(wire.chat_request(request.passthrough, "base", built.messages, built.max_tokens, False))

    assert sent["max_tokens"] == 32
    assert "max_completion_tokens" not in sent
    assert set(sent) == {"temperature", "model", "messages", "max_tokens", "stream"}
