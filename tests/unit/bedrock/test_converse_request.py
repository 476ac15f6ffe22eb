"""An invocation body as the caller-side fallback asks Bedrock (``clients.converse_request``): turns, context,
limits, and what the caller is told when a body cannot be asked."""

from __future__ import annotations

import doctest
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

import clients.converse_request
from clients.converse_request import ChatBodyError, converse_request

MODEL = "arn:aws:bedrock:us-east-1:123456789012:imported-model/abc"
CONVERSE = botocore.session.get_session().get_service_model("bedrock-runtime").operation_model("Converse")


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def test_history_system_messages_context_and_limits_become_one_valid_converse_request() -> None:
    body = {
        "history": [assistant("Welcome!"), user("I liked Frieren."), assistant("Then try Mushishi."), user("More?")],
        "messages": [{"role": "system", "content": "Answer in English."}, user("Anything like Dungeon Meshi?")],
        "retrieved_context": ["Dungeon Meshi: 14 volumes.", "  "],
        "max_completion_tokens": 200,
        "temperature": 0.2,
        "top_p": 1,
        "stop": "###",
        "intent": "recommendation",  # the gateway's own routing field: no meaning to Bedrock
    }

    request = converse_request(MODEL, body, system_prompt="You are the store's assistant.")

    assert CONVERSE.input_shape is not None
    validate_parameters(request, CONVERSE.input_shape)  # botocore's own model of Converse accepts it
    assert request["system"] == [{"text": "You are the store's assistant."}, {"text": "Answer in English."}]
    # The greeting before the first user turn is dropped; the two user turns in a row share one message.
    assert request["messages"] == [
        {"role": "user", "content": [{"text": "I liked Frieren."}]},
        {"role": "assistant", "content": [{"text": "Then try Mushishi."}]},
        {
            "role": "user",
            "content": [
                {"text": "Context:"},
                {"text": "Dungeon Meshi: 14 volumes."},
                {"text": "Question:"},
                {"text": "More?"},
                {"text": "Anything like Dungeon Meshi?"},
            ],
        },
    ]
    assert request["inferenceConfig"] == {"maxTokens": 200, "temperature": 0.2, "topP": 1.0, "stopSequences": ["###"]}
    assert "intent" not in str(request)


def test_only_the_newest_turns_are_sent_and_the_first_is_the_users() -> None:
    turns = [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(9)]

    request = converse_request(MODEL, {"messages": turns}, max_turns=4)

    # The newest four are a3 q4 a5 q6 a7 q8 cut to a5 q6 a7 q8, then the assistant's a5 dropped.
    assert [m["content"][0]["text"] for m in request["messages"]] == ["q6", "a7", "q8"]
    assert request["inferenceConfig"] == {"maxTokens": 512}
    assert "system" not in request


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "messages: the question (role 'user') must come last, not 'none'"),
        ({"messages": [user("hi"), assistant("hello")]}, "must come last, not 'assistant'"),
        ({"messages": "hi"}, "messages: a list of messages is expected, got str"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0]: a message needs a role in system"),
        ({"messages": [user("hi")], "history": [{"role": "user", "content": 5}]}, "history[0].content: text is"),
        ({"messages": [user("hi")], "max_tokens": 0}, "max_tokens: a positive integer is expected, got 0"),
        ({"messages": [user("hi")], "max_tokens": True}, "max_tokens: a positive integer is expected, got True"),
        ({"messages": [user("hi")], "max_tokens": 8, "max_completion_tokens": 9}, "differ: set one of them"),
        ({"messages": [user("hi")], "temperature": "hot"}, "temperature: a number is expected, got 'hot'"),
        ({"messages": [user("hi")], "stop": [1]}, "stop: a string or a list of strings is expected"),
        ({"messages": [user("hi")], "retrieved_context": "doc"}, "retrieved_context: a list of text chunks"),
    ],
)
def test_a_body_bedrock_cannot_be_asked_is_refused_naming_the_field(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ChatBodyError) as refused:
        converse_request(MODEL, body)

    assert message in str(refused.value)


def test_the_docstring_examples_run() -> None:
    result = doctest.testmod(clients.converse_request, optionflags=doctest.ELLIPSIS)
    assert (result.attempted > 0, result.failed) == (True, 0)
