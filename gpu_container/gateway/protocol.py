"""The request model of ``/invocations``: an OpenAI chat-completions payload plus conversation fields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetops.validation import StrictModel
from gateway.errors import ErrorCode, GatewayError


class ChatMessage(StrictModel):
    role: Literal["system", "user", "assistant"]
    content: str


class InvocationRequest(BaseModel):
    """The body of ``POST /invocations``.

    ``messages`` is the OpenAI list; its last user message is the current question. ``history`` holds
    prior turns (the client may also put them in ``messages``: both are treated as history). Other
    OpenAI sampling fields (``temperature``, ``top_p``, ``stop``, ``seed``, ...) pass through to vLLM,
    which validates them.
    """

    model_config = ConfigDict(extra="allow")

    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, gt=0)
    stream: bool = False
    model: str | None = None
    adapter: str | None = None
    session_id: str | None = None
    history: list[ChatMessage] = Field(default_factory=list)
    retrieved_context: list[str] = Field(default_factory=list)
    intent: str | None = None
    locale: str | None = None

    @property
    def passthrough(self) -> dict[str, Any]:
        """OpenAI sampling fields the gateway does not interpret itself."""
        return dict(self.model_extra or {})


def parse_invocation(raw: bytes) -> InvocationRequest:
    """Parse and validate a request body.

    Raises
    ------
    GatewayError
        ``invalid_json`` for malformed JSON, ``invalid_request`` for missing or mistyped fields
        (the message lists each field and what is wrong with it).

    Examples
    --------
    >>> parse_invocation(b'{"messages": [{"role": "user", "content": "hi"}]}').messages[0].content
    'hi'
    """
    try:
        return InvocationRequest.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        if any(e["type"] == "json_invalid" for e in errors):
            raise GatewayError(ErrorCode.INVALID_JSON, f"request body is not valid JSON: {errors[0]['msg']}") from None
        problems = [{"field": ".".join(str(p) for p in e["loc"]) or "(body)", "problem": e["msg"]} for e in errors]
        summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
        raise GatewayError(ErrorCode.INVALID_REQUEST, f"invalid request: {summary}", fields=problems) from None
