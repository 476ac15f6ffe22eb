"""A gateway invocation body as a Bedrock Converse request: what the caller-side fallback asks Bedrock.

The body is read as the gateway reads it (README, GPU data plane container): ``messages``, ``history`` (prior
turns), ``retrieved_context`` (chunks, most relevant first), ``max_completion_tokens`` or ``max_tokens``, and the
sampling fields Converse also has (``temperature``, ``top_p``, ``stop``). Fields only the gateway understands
(``intent``, ``locale``, ``adapter``, ...) do not apply to a Bedrock model and are left out.

Converse wants turns that start with the user's and alternate, so leading assistant turns are dropped and
consecutive turns of one role become one message; only the newest ``max_turns`` are sent, a bound on what one
fallback answer costs (the gateway's token budget does not apply to Bedrock).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The roles the gateway accepts in ``messages`` and ``history``.
ROLES = ("system", "user", "assistant")


class ChatBodyError(ValueError):
    """The invocation body cannot be asked of Bedrock; the message names the field and what is wrong."""


def converse_request(
    model_id: str,
    body: Mapping[str, Any],
    *,
    system_prompt: str | None = None,
    default_max_tokens: int = 512,
    max_turns: int = 20,
) -> dict[str, Any]:
    """Converse's keyword arguments for one invocation body.

    Parameters
    ----------
    model_id
        The Bedrock model, inference profile or imported model to ask.
    body
        The ``/invocations`` body sent to the endpoint.
    system_prompt
        The caller's system prompt for Bedrock (the gateway's own stays in the image); the body's system
        messages follow it.
    default_max_tokens
        The answer's length when the body names none.
    max_turns
        How many of the newest turns (history and messages, the question included) are sent.

    Raises
    ------
    ChatBodyError
        The body has no question, a malformed turn or a malformed field.

    Examples
    --------
    >>> request = converse_request("m", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 32})
    >>> request["messages"], request["inferenceConfig"]
    ([{'role': 'user', 'content': [{'text': 'Hi'}]}], {'maxTokens': 32})
    >>> converse_request("m", {"messages": [{"role": "assistant", "content": "Hello"}]})
    Traceback (most recent call last):
    ...
    clients.converse_request.ChatBodyError: messages: the question (role 'user') must come last, not 'assistant'
    """
    turns = _turns(body, "history") + _turns(body, "messages")
    if not turns or turns[-1][0] != "user":
        last = turns[-1][0] if turns else "none"
        raise ChatBodyError(f"messages: the question (role 'user') must come last, not {last!r}")
    system = [text for role, text in turns if role == "system"]
    dialogue = _alternating([(role, text) for role, text in turns if role != "system"][-max_turns:])
    dialogue[-1]["content"] = _with_context(body, dialogue[-1]["content"])
    request: dict[str, Any] = {
        "modelId": model_id,
        "messages": dialogue,
        "inferenceConfig": _inference_config(body, default_max_tokens),
    }
    blocks = [{"text": text} for text in ([system_prompt] if system_prompt else []) + system if text.strip()]
    if blocks:
        request["system"] = blocks
    return request


def _turns(body: Mapping[str, Any], field: str) -> list[tuple[str, str]]:
    value = body.get(field, [])
    if not isinstance(value, list):
        raise ChatBodyError(f"{field}: a list of messages is expected, got {type(value).__name__}")
    turns = []
    for index, message in enumerate(value):
        if not isinstance(message, Mapping) or message.get("role") not in ROLES:
            raise ChatBodyError(f"{field}[{index}]: a message needs a role in {', '.join(ROLES)}")
        if not isinstance(message.get("content"), str):
            raise ChatBodyError(f"{field}[{index}].content: text is expected")
        if message["content"].strip():  # Converse refuses blank text blocks; a blank turn says nothing
            turns.append((str(message["role"]), str(message["content"])))
    return turns


def _alternating(turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """User first, then alternating roles: consecutive turns of one role share a message."""
    while turns and turns[0][0] != "user":
        turns = turns[1:]
    messages: list[dict[str, Any]] = []
    for role, text in turns:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append({"text": text})
        else:
            messages.append({"role": role, "content": [{"text": text}]})
    return messages


def _with_context(body: Mapping[str, Any], question: list[dict[str, str]]) -> list[dict[str, str]]:
    chunks = body.get("retrieved_context", [])
    if not isinstance(chunks, list) or not all(isinstance(c, str) for c in chunks):
        raise ChatBodyError("retrieved_context: a list of text chunks is expected")
    kept = [c for c in chunks if c.strip()]
    if not kept:
        return question
    return [{"text": "Context:"}, *({"text": chunk} for chunk in kept), {"text": "Question:"}, *question]


def _inference_config(body: Mapping[str, Any], default_max_tokens: int) -> dict[str, Any]:
    config: dict[str, Any] = {"maxTokens": default_max_tokens}
    asked = {field: body[field] for field in ("max_tokens", "max_completion_tokens") if body.get(field) is not None}
    for field, value in asked.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ChatBodyError(f"{field}: a positive integer is expected, got {value!r}")
        config["maxTokens"] = value
    if len(set(asked.values())) > 1:  # as the gateway refuses it
        raise ChatBodyError("max_tokens and max_completion_tokens differ: set one of them")
    for field, name in (("temperature", "temperature"), ("top_p", "topP")):
        value = body.get(field)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ChatBodyError(f"{field}: a number is expected, got {value!r}")
            config[name] = float(value)
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise ChatBodyError("stop: a string or a list of strings is expected")
        config["stopSequences"] = stops
    return config
