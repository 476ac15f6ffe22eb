"""The request model of ``/invocations`` (and ``POST /v1/chat/completions``): an allow-list, nothing passes unnamed.

A request carries the conversation fields the gateway reads itself and a fixed set of OpenAI sampling fields
it forwards to vLLM (:data:`SAMPLING_FIELDS`). Every other field is refused with a 400 that names it: vLLM
accepts many fields that multiply the work of one request (``n``, beam search, ``ignore_eos``, grammars,
tools the budget never counted), so silently dropping or forwarding an unknown field would either change
what the client asked for or let it past the budget. Types are strict (no ``"5"`` for 5, no ``"yes"`` for
true). Bounds that are policy (``n``, ``top_logprobs``, ``min_tokens``, ``stop``) come from ``gateway.yaml``'s
``limits`` and are checked by :func:`check_limits`; the answer length is the budget's (:mod:`gateway.prompt`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from fleetops.validation import StrictModel
from gateway.errors import ErrorCode, GatewayError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

    from gateway.config import RequestLimits


class ChatMessage(StrictModel):
    role: Literal["system", "user", "assistant"]
    content: StrictStr


class StreamOptions(StrictModel):
    include_usage: StrictBool = False
    continuous_usage_stats: StrictBool = False


PositiveInt = Annotated[StrictInt, Field(gt=0)]
Penalty = Annotated[StrictFloat, Field(ge=-2, le=2)]

#: The OpenAI sampling fields forwarded to the engine as the client sent them (after the checks here).
SAMPLING_FIELDS: set[str] = {
    "temperature",
    "top_p",
    "top_k",
    "min_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "n",
    "logprobs",
    "top_logprobs",
    "stream_options",
    "user",
}

_BEAM = "beam search is not served: each beam is a whole generation the budget does not count"
_GRAMMAR = "structured output (grammar-constrained decoding) is not served"
_TOOLS = "tools and documents are not served: the token budget does not count them"
_TEMPLATE = "the prompt is rendered with the model's own chat template; a request cannot change it"

#: Fields vLLM would accept and the gateway refuses on purpose: field -> why (the 400 says it).
REFUSED_FIELDS: dict[str, str] = {
    "best_of": _BEAM,
    "use_beam_search": _BEAM,
    "length_penalty": _BEAM,
    "early_stopping": _BEAM,
    "ignore_eos": "generation always stops at the end-of-sequence token; min_tokens forces a length within its limit",
    "prompt_logprobs": "prompt log-probabilities are not served",
    "response_format": _GRAMMAR,
    "structured_outputs": _GRAMMAR,
    "guided_json": _GRAMMAR,
    "guided_regex": _GRAMMAR,
    "guided_choice": _GRAMMAR,
    "guided_grammar": _GRAMMAR,
    "guided_decoding_backend": _GRAMMAR,
    "guided_whitespace_pattern": _GRAMMAR,
    "tools": _TOOLS,
    "tool_choice": _TOOLS,
    "parallel_tool_calls": _TOOLS,
    "functions": _TOOLS,
    "function_call": _TOOLS,
    "documents": _TOOLS,
    "chat_template": _TEMPLATE,
    "chat_template_kwargs": _TEMPLATE,
    "add_generation_prompt": _TEMPLATE,
    "continue_final_message": _TEMPLATE,
}


class InvocationRequest(BaseModel):
    """The body of ``POST /invocations``.

    ``messages`` is the OpenAI list; its last user message is the current question. ``history`` holds
    prior turns (the client may also put them in ``messages``: both are treated as history).
    ``max_completion_tokens`` is the newer OpenAI name of ``max_tokens``: either one, under the same cap.
    """

    model_config = ConfigDict(extra="forbid")

    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: PositiveInt | None = None
    max_completion_tokens: PositiveInt | None = None
    stream: StrictBool = False
    model: StrictStr | None = None
    adapter: StrictStr | None = None
    session_id: StrictStr | None = None
    history: list[ChatMessage] = Field(default_factory=list)
    retrieved_context: list[StrictStr] = Field(default_factory=list)
    intent: StrictStr | None = None
    locale: StrictStr | None = None
    # Forwarded to the engine (SAMPLING_FIELDS); static ranges here, policy caps in check_limits.
    temperature: Annotated[StrictFloat, Field(ge=0, le=2)] | None = None
    top_p: Annotated[StrictFloat, Field(gt=0, le=1)] | None = None
    top_k: Annotated[StrictInt, Field(ge=-1)] | None = None
    min_tokens: Annotated[StrictInt, Field(ge=0)] | None = None
    stop: StrictStr | list[StrictStr] | None = None
    seed: Annotated[StrictInt, Field(ge=-(2**63), lt=2**63)] | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    n: PositiveInt | None = None
    logprobs: StrictBool | None = None
    top_logprobs: Annotated[StrictInt, Field(ge=0)] | None = None
    stream_options: StreamOptions | None = None
    user: Annotated[StrictStr, Field(max_length=256)] | None = None

    @model_validator(mode="after")
    def _one_answer_length(self) -> InvocationRequest:
        both = self.max_tokens is not None and self.max_completion_tokens is not None
        if both and self.max_tokens != self.max_completion_tokens:
            raise ValueError("max_tokens and max_completion_tokens differ: set one of them")
        return self

    @property
    def answer_tokens(self) -> tuple[str, int | None]:
        """The field that asks for the answer's length, and its value (``None``: the budget's default)."""
        if self.max_completion_tokens is not None:
            return "max_completion_tokens", self.max_completion_tokens
        return "max_tokens", self.max_tokens

    @property
    def passthrough(self) -> dict[str, Any]:
        """The sampling fields the client set, to forward to the engine as they are."""
        return self.model_dump(include=SAMPLING_FIELDS, exclude_none=True)


def parse_invocation(raw: bytes) -> InvocationRequest:
    """Parse and validate a request body.

    Raises
    ------
    GatewayError
        ``invalid_json`` for malformed JSON, ``unsupported_field`` when a field is not on the allow-list (each
        named, with why), ``invalid_request`` for missing or mistyped fields (each field and what is wrong).

    Examples
    --------
    >>> parse_invocation(b'{"messages": [{"role": "user", "content": "hi"}]}').messages[0].content
    'hi'
    >>> parse_invocation(b'{"messages": [{"role": "user", "content": "hi"}], "best_of": 4}')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gateway.errors.GatewayError: best_of: not accepted: beam search is not served: ...
    """
    try:
        return InvocationRequest.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        if any(e["type"] == "json_invalid" for e in errors):
            raise GatewayError(ErrorCode.INVALID_JSON, f"request body is not valid JSON: {errors[0]['msg']}") from None
        problems = [{"field": ".".join(str(p) for p in e["loc"]) or "(body)", "problem": _problem(e)} for e in errors]
        summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
        if any(e["type"] == "extra_forbidden" for e in errors):
            raise GatewayError(ErrorCode.UNSUPPORTED_FIELD, summary, fields=problems) from None
        raise GatewayError(ErrorCode.INVALID_REQUEST, f"invalid request: {summary}", fields=problems) from None


def _problem(error: ErrorDetails) -> str:
    if error["type"] != "extra_forbidden":
        return error["msg"].removeprefix("Value error, ")
    reason = REFUSED_FIELDS.get(str(error["loc"][-1])) if len(error["loc"]) == 1 else None
    return f"not accepted: {reason}" if reason else "unknown field, not accepted"


def check_limits(request: InvocationRequest, limits: RequestLimits) -> None:
    """Refuse a sampling field beyond its configured limit (``over_limit``, naming the field and the limit).

    Examples
    --------
    >>> from gateway.config import RequestLimits
    >>> request = InvocationRequest(messages=[ChatMessage(role="user", content="hi")], n=3)
    >>> check_limits(request, RequestLimits(n=1))
    Traceback (most recent call last):
    ...
    gateway.errors.GatewayError: n is 3: the limit is 1
    """
    stops = [request.stop] if isinstance(request.stop, str) else request.stop or []
    checks = (
        ("n", request.n, limits.n, "n is {}"),
        ("top_logprobs", request.top_logprobs, limits.top_logprobs, "top_logprobs is {}"),
        ("min_tokens", request.min_tokens, limits.min_tokens, "min_tokens is {}"),
        ("stop", len(stops), limits.stop_sequences, "stop has {} sequences"),
        ("stop", max(map(len, stops), default=0), limits.stop_sequence_chars, "a stop sequence has {} characters"),
    )
    for field, value, limit, says in checks:
        if value is not None and value > limit:
            raise GatewayError(
                ErrorCode.OVER_LIMIT, f"{says.format(value)}: the limit is {limit}", field=field, limit=limit
            )
