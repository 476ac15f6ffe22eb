"""The context budget: byte-stable prefix, chunked sliding window, marker, and the max_model_len invariant."""

from __future__ import annotations

import itertools
import random

import pytest

from gateway.config import GatewayConfig
from gateway.errors import GatewayError
from gateway.prompt import PromptBuilder, split_turns
from gateway.protocol import ChatMessage, InvocationRequest
from gateway.tokens import TokenCounter
from gateway.window import window_start

WORDS = ["manga", "volume", "chapter", "release", "order", "shipping", "漫画", "最新刊", "予約", "the", "of"]


def text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def conversation(turns: int, seed: int = 1, words: int = 40) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(turns):
        out.append({"role": "user", "content": text(rng, rng.randint(5, words))})
        out.append({"role": "assistant", "content": text(rng, rng.randint(5, words * 2))})
    return out


def request(
    history: list[dict[str, str]], question: str = "what about volume 5?", **extra: object
) -> InvocationRequest:
    return InvocationRequest.model_validate(
        {"messages": [{"role": "user", "content": question}], "history": history, **extra}
    )


def test_counts_match_a_full_tokenization(counter: TokenCounter) -> None:
    messages = [*conversation(5), {"role": "user", "content": "最新刊はいつ\uff1f"}]
    assert counter.additive
    assert counter.count(messages) == counter.count_exact(messages)
    assert counter.render(messages[:1]).startswith("<s><|user|>\n")


def test_window_slides_in_chunks_at_stable_checkpoints() -> None:
    sizes = [100] * 30
    starts = [window_start(sizes[:n], high=1000, low=500) for n in range(1, 31)]
    assert all(b >= a for a, b in itertools.pairwise(starts))  # never goes back
    changes = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    assert changes <= 5  # jumps at checkpoints only, not every turn
    for n, start in enumerate(starts, start=1):
        assert sum(sizes[start:n]) <= 1000


def test_history_is_kept_whole_under_the_budget(builder: PromptBuilder) -> None:
    built = builder.build(request(conversation(2)))
    assert built.dropped_turns == 0
    assert [m["role"] for m in built.messages] == ["system", "user", "assistant", "user", "assistant", "user"]


def test_prefix_is_byte_stable_across_users_and_turns(builder: PromptBuilder, config: GatewayConfig) -> None:
    a = builder.build(request(conversation(3, seed=1), session_id="alice", locale="ja-JP"))
    b = builder.build(request(conversation(9, seed=2), session_id="bob", retrieved_context=["doc"]))
    assert a.messages[0] == b.messages[0] == {"role": "system", "content": config.system_prompt.text}


def test_long_session_drops_oldest_turns_with_an_explicit_marker(builder: PromptBuilder) -> None:
    built = builder.build(request(conversation(60), retrieved_context=["Volume 5 ships on 2026-12-04."]))
    assert built.dropped_turns > 0
    assert built.messages[1] == {"role": "system", "content": f"[{built.dropped_turns} earlier turns omitted]"}
    assert built.messages[-1]["content"].startswith("Context:\nVolume 5 ships on 2026-12-04.")
    assert built.messages[-1]["content"].endswith("Question: what about volume 5?")
    assert built.prompt_tokens == builder.counter.count_exact(built.messages)


def test_most_turns_only_append_so_the_prefix_cache_keeps_hitting(builder: PromptBuilder) -> None:
    history = conversation(40, seed=3)
    appended = 0
    previous: list[dict[str, str]] | None = None
    for turn in range(1, 40):
        built = builder.build(request(history[: 2 * turn]))
        if previous is not None and built.messages[: len(previous) - 1] == previous[:-1]:
            appended += 1
        previous = built.messages
    assert appended / 38 >= 0.8


@pytest.mark.parametrize("seed", range(25))
def test_prompt_plus_max_tokens_never_exceeds_max_model_len(builder: PromptBuilder, seed: int) -> None:
    rng = random.Random(seed)
    max_tokens = rng.choice([1, 64, 256, 512])
    question = text(rng, rng.randint(1, 600))
    try:
        built = builder.build(request(conversation(rng.randint(0, 80), seed, words=rng.randint(5, 200)), question,
                                      max_tokens=max_tokens))  # fmt: skip
    except GatewayError as exc:
        assert exc.code == "prompt_too_large"  # only when the question alone cannot fit
        return
    assert built.prompt_tokens + built.max_tokens <= builder.budget.max_model_len
    assert built.prompt_tokens == builder.counter.count_exact(built.messages)
    assert built.messages[-1]["content"] == question


def test_compressed_retry_keeps_less_history_but_the_essentials(builder: PromptBuilder) -> None:
    req = request(conversation(10), retrieved_context=["ctx"])
    full, compressed = builder.build(req), builder.build(req, compressed=True)
    assert compressed.prompt_tokens < full.prompt_tokens
    assert compressed.messages[0] == full.messages[0]
    assert compressed.messages[-1] == full.messages[-1]


def test_client_system_messages_go_after_the_cacheable_part(builder: PromptBuilder) -> None:
    req = InvocationRequest.model_validate(
        {"messages": [{"role": "system", "content": "user is a premium member"}, {"role": "user", "content": "hi"}]}
    )
    built = builder.build(req)
    assert built.messages[0]["content"] == builder.system_prompt.text
    assert built.messages[-2] == {"role": "system", "content": "user is a premium member"}


@pytest.mark.parametrize(
    ("req", "code"),
    [
        (request([], max_tokens=100_000), "max_tokens_too_large"),
        (request([], "manga " * 5000), "prompt_too_large"),
        (request([], retrieved_context=["volume " * 2000]), "context_too_large"),
        (InvocationRequest(messages=[ChatMessage(role="assistant", content="hello")]), "no_question"),
    ],
)
def test_requests_that_cannot_fit_are_refused_with_a_reason(
    builder: PromptBuilder, req: InvocationRequest, code: str
) -> None:
    with pytest.raises(GatewayError) as info:
        builder.build(req)
    assert info.value.code.status == 400
    assert info.value.code == code
    assert info.value.message


def test_split_turns_keeps_replies_with_their_question() -> None:
    msgs = [ChatMessage(role=r, content=r) for r in ("assistant", "user", "assistant", "assistant", "user")]
    assert [[m.role for m in t] for t in split_turns(msgs)] == [
        ["assistant"],
        ["user", "assistant", "assistant"],
        ["user"],
    ]
