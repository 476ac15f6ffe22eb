"""One answer from one variant of an endpoint, and how the gates ask for one.

Apart from :mod:`fleetops.promotion.candidate_gate`: the adapter that asks an endpoint and the shadow comparison
read answers too, without loading the evaluation suite.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One answer from one variant: its status (200 or the container's), the text, and how long it took."""

    status: int
    text: str | None
    seconds: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.text)


def answer_text(payload: dict[str, Any]) -> str | None:
    """The answer of an OpenAI chat completion; ``None`` for the gateway's fallback, which is no model answer.

    Examples
    --------
    >>> answer_text({"choices": [{"message": {"content": "Try Frieren."}, "finish_reason": "stop"}]})
    'Try Frieren.'
    >>> answer_text({"choices": [{"message": {"content": "Sorry"}, "finish_reason": "fallback"}]}) is None
    True
    """
    choices = payload.get("choices") or [{}]
    if choices[0].get("finish_reason") == "fallback":
        return None
    content = (choices[0].get("message") or {}).get("content")
    return content if isinstance(content, str) else None


#: Ask one variant of the endpoint (by name) with an OpenAI chat body; never raises for a failed answer.
Invoke = Callable[[str, dict[str, Any]], Reply]
