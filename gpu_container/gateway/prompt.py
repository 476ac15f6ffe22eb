"""The context budget: a byte-stable cacheable prefix, then a sliding window of turns that slides in chunks.

Prompt layout (what the engine sees, in order)::

    system    the versioned system prompt            <- byte-stable: identical for every request
    system    "[N earlier turns omitted]"            <- only when turns were dropped; N changes only at checkpoints
    ...       kept history turns, oldest first       <- grows by appending, so the prefix cache keeps hitting
    system    the client's own system messages, if any
    user      retrieved context + the current question

The window is computed from the conversation alone (the gateway keeps no session state): walking the
turns oldest first, history may grow to ``history_high_tokens``; when a turn pushes it over, the oldest
turns are dropped at once until it is at most ``history_low_tokens``. Replaying the same walk on the
next request gives the same cut point, so most turns only append to the previous prompt, and the
prefix changes only at those checkpoints. The system prompt, the retrieved context and the current
question are always kept, and ``prompt_tokens + max_tokens <= max_model_len`` always holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.errors import ErrorCode, GatewayError
from gateway.protocol import ChatMessage, InvocationRequest

if TYPE_CHECKING:
    from gateway.config import BudgetConfig, SystemPrompt
    from gateway.tokens import Message, TokenCounter


@dataclass(frozen=True)
class BuiltPrompt:
    """A prompt that fits the budget."""

    messages: list[Message]
    prompt_tokens: int
    max_tokens: int
    dropped_turns: int
    kept_turns: int

    @property
    def trimmed(self) -> bool:
        return self.dropped_turns > 0


def split_turns(history: list[ChatMessage]) -> list[list[ChatMessage]]:
    """Group history into turns: a turn starts at each user message (assistant replies stay with it).

    Examples
    --------
    >>> u, a = ChatMessage(role="user", content="q"), ChatMessage(role="assistant", content="r")
    >>> [len(t) for t in split_turns([u, a, u, a, u])]
    [2, 2, 1]
    """
    turns: list[list[ChatMessage]] = []
    for message in history:
        if message.role == "user" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return turns


def window_start(turn_tokens: list[int], high: int, low: int) -> int:
    """Index of the first kept turn: slide in chunks from ``high`` down to ``low`` (stable checkpoints).

    Examples
    --------
    >>> window_start([100] * 5, high=500, low=250)
    0
    >>> window_start([100] * 6, high=500, low=250)  # the 6th turn overflows: down to the last 2 turns
    4
    >>> window_start([100] * 9, high=500, low=250)  # the window grows again from the same cut
    4
    >>> window_start([100] * 10, high=500, low=250)  # the 10th overflows: the next cut
    8
    """
    start, total = 0, 0
    for index, tokens in enumerate(turn_tokens):
        total += tokens
        if total > high:
            while total > low and start <= index:
                total -= turn_tokens[start]
                start += 1
    return start


class PromptBuilder:
    """Builds budgeted prompts from invocation requests.

    Parameters
    ----------
    counter
        The model's own tokenizer and chat template.
    system_prompt
        The versioned, byte-stable system prompt.
    budget
        Token budgets from ``gateway.yaml``.
    """

    def __init__(self, counter: TokenCounter, system_prompt: SystemPrompt, budget: BudgetConfig) -> None:
        self.counter = counter
        self.system_prompt = system_prompt
        self.budget = budget
        self._prefix: list[Message] = [{"role": "system", "content": system_prompt.text}]

    @property
    def prefix(self) -> list[Message]:
        """The byte-stable part every prompt starts with (what warm-up puts into the prefix cache)."""
        return list(self._prefix)

    def build(self, request: InvocationRequest, compressed: bool = False) -> BuiltPrompt:
        """Fit a request into the budget.

        Parameters
        ----------
        request
            The parsed invocation.
        compressed
            Keep at most ``compressed_history_tokens`` of history (the one retry after an engine failure).

        Raises
        ------
        GatewayError
            ``max_tokens_too_large``, ``no_question``, ``context_too_large`` or ``prompt_too_large``.

        Examples
        --------
        With a small budget and a stand-in counter (one token per word, one per message), ten turns of
        9 tokens each pass ``history_high_tokens``:

        >>> from gateway.config import BudgetConfig, SystemPrompt
        >>> class Words:  # stands in for TokenCounter
        ...     def message(self, role, content):
        ...         return 1 + len(content.split())
        ...     def count(self, messages):
        ...         return sum(self.message(m["role"], m["content"]) for m in messages)
        ...     def count_text(self, text):
        ...         return len(text.split())
        >>> budget = BudgetConfig(max_model_len=200, default_max_tokens=20, max_tokens_limit=50, history_high_tokens=60,
        ...                       history_low_tokens=30, compressed_history_tokens=10, max_context_tokens=50)
        >>> system = SystemPrompt(version="1", text="You are the manga store's assistant.")
        >>> builder = PromptBuilder(Words(), system, budget)
        >>> turn = [ChatMessage(role="user", content="Any manga like Frieren?"),
        ...         ChatMessage(role="assistant", content="Try Dungeon Meshi.")]
        >>> request = InvocationRequest(messages=[*turn * 10, ChatMessage(role="user", content="And after that?")])
        >>> built = builder.build(request)
        >>> built.dropped_turns, built.kept_turns, built.messages[1]["content"]
        (4, 6, '[4 earlier turns omitted]')
        >>> built.prompt_tokens + built.max_tokens <= builder.budget.max_model_len
        True
        """
        budget, counter = self.budget, self.counter
        field, asked = request.answer_tokens  # max_tokens or max_completion_tokens: one cap for both names
        max_tokens = asked or budget.default_max_tokens
        if max_tokens > budget.max_tokens_limit:
            raise GatewayError(
                ErrorCode.MAX_TOKENS_TOO_LARGE,
                f"{field} {max_tokens} is beyond the budget: at most {budget.max_tokens_limit}",
                field=field,
                limit=budget.max_tokens_limit,
            )
        conversation = [*request.history, *request.messages]
        if conversation[-1].role != "user":
            raise GatewayError(ErrorCode.NO_QUESTION)
        question = conversation[-1].content
        client_system = [{"role": "system", "content": m.content} for m in conversation[:-1] if m.role == "system"]
        history = [m for m in conversation[:-1] if m.role != "system"]
        final = [*client_system, {"role": "user", "content": self._with_context(request.retrieved_context, question)}]

        available = budget.max_model_len - max_tokens
        fixed = counter.count([*self._prefix, *final])
        if fixed > available:
            raise GatewayError(
                ErrorCode.PROMPT_TOO_LARGE,
                f"system prompt, context and question take {fixed} tokens; with max_tokens {max_tokens} at most "
                f"{available} fit in max_model_len {budget.max_model_len}",
                prompt_tokens=fixed,
                limit=available,
            )
        turns = split_turns(history)
        sizes = [sum(counter.message(m.role, m.content) for m in turn) for turn in turns]
        high, low = budget.history_high_tokens, budget.history_low_tokens
        if compressed:
            high = low = min(low, budget.compressed_history_tokens)
        start = window_start(sizes, high, low)
        room = available - fixed
        while start < len(turns):
            marker = self._marker(start)
            used = sum(sizes[start:]) + sum(counter.message(m["role"], m["content"]) for m in marker)
            if used <= room:
                break
            start += 1  # a hard trim beyond the checkpoint: only when the question itself is very long
        kept = [{"role": m.role, "content": m.content} for turn in turns[start:] for m in turn]
        messages = [*self._prefix, *self._marker(start), *kept, *final]
        prompt_tokens = counter.count(messages)
        if prompt_tokens + max_tokens > budget.max_model_len:  # the invariant the KV cache depends on: a bug
            raise RuntimeError(f"budget violated: {prompt_tokens} + {max_tokens} > {budget.max_model_len}")
        return BuiltPrompt(messages, prompt_tokens, max_tokens, dropped_turns=start, kept_turns=len(turns) - start)

    def _with_context(self, context: list[str], question: str) -> str:
        if not context:
            return question
        text = "\n---\n".join(context)
        tokens = self.counter.count_text(text)
        if tokens > self.budget.max_context_tokens:
            raise GatewayError(
                ErrorCode.CONTEXT_TOO_LARGE,
                f"retrieved_context has {tokens} tokens; at most {self.budget.max_context_tokens} are allowed",
                limit=self.budget.max_context_tokens,
            )
        return f"Context:\n{text}\n\nQuestion: {question}"

    def _marker(self, dropped: int) -> list[Message]:
        if dropped == 0:
            return []
        return [{"role": "system", "content": self.budget.truncation_marker.format(dropped=dropped)}]
