"""The budget by category: evidence kept ahead of history, cut by whole chunks last, the summary slot, the invariant."""

from __future__ import annotations

import itertools
import random

import pytest

from gateway.config import BudgetConfig, GatewayConfig
from gateway.errors import GatewayError
from gateway.prompt import CHUNK_SEPARATOR, MARKER, SUMMARY_FRAME, SUMMARY_ROLE, PromptBuilder, SlotText
from gateway.protocol import InvocationRequest
from gateway.tokens import TokenCounter

WORDS = ["manga", "volume", "chapter", "release", "order", "shipping", "漫画", "最新刊", "予約", "the", "of", "box"]


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def history(turns: int, seed: int = 1, size: int = 30) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(turns):
        out += [{"role": "user", "content": words(rng, size)}, {"role": "assistant", "content": words(rng, 2 * size)}]
    return out


def chunks(n: int, size: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"[doc {i}] " + words(rng, size) for i in range(n)]


def request(past: list[dict[str, str]], question: str, context: list[str], max_tokens: int = 64) -> InvocationRequest:
    body = {"messages": [{"role": "user", "content": question}], "history": past, "retrieved_context": context}
    return InvocationRequest.model_validate({**body, "max_tokens": max_tokens})


def kept_chunks(built_question: str, given: list[str]) -> list[str]:
    if not built_question.startswith("Context:\n"):
        return []
    text = built_question.removeprefix("Context:\n").rsplit("\n\nQuestion: ", 1)[0]
    return text.split(CHUNK_SEPARATOR)


@pytest.fixture
def small(counter: TokenCounter, config: GatewayConfig) -> PromptBuilder:
    """The shipped budget's shape at a quarter of the size, so a few turns and chunks fill it."""
    budget = BudgetConfig(
        max_model_len=1024,
        default_max_tokens=64,
        max_tokens_limit=128,
        system_tokens=250,
        max_context_tokens=300,
        history_high_tokens=250,
        history_low_tokens=120,
        summary_tokens=90,
        compressed_history_tokens=32,
    )
    return PromptBuilder(counter, config.system_prompt, budget)


def test_the_shipped_budget_has_the_fields_shape(config: GatewayConfig) -> None:
    budget = config.budget
    assert budget.max_model_len == 4096
    assert budget.categories == {"system": 400, "retrieval": 1400, "history": 1200, "summary": 400, "generation": 512}
    assert sum(budget.categories.values()) <= budget.max_model_len


def test_a_realistic_rag_request_passes_whole(builder: PromptBuilder) -> None:
    context = chunks(4, 90)  # about 400 tokens of retrieved evidence
    assert 300 <= builder.counter.count_text(CHUNK_SEPARATOR.join(context)) <= 500
    built = builder.build(request(history(6), "which of these ships first?", context))
    assert built.dropped_turns == built.dropped_chunks == 0
    assert kept_chunks(built.messages[-1]["content"], context) == context


def test_history_is_cut_before_any_retrieved_chunk(small: PromptBuilder) -> None:
    context = chunks(3, 60)
    question = words(random.Random(3), 250)  # long: not everything fits
    built = small.build(request(history(8), question, context, max_tokens=128))
    assert built.dropped_turns > 0
    assert built.dropped_chunks == 0, "evidence went before the history it outranks"
    assert kept_chunks(built.messages[-1]["content"], context) == context
    assert built.prompt_tokens + built.max_tokens <= small.budget.max_model_len


def test_retrieval_is_trimmed_last_by_whole_chunks_from_the_end(small: PromptBuilder) -> None:
    context = chunks(3, 80)
    question = words(random.Random(4), 520)  # with every turn gone, still not every chunk fits
    built = small.build(request(history(8), question, context, max_tokens=128))
    assert built.kept_turns == 0
    assert 0 < built.dropped_chunks < len(context)
    kept = kept_chunks(built.messages[-1]["content"], context)
    assert kept == context[: len(context) - built.dropped_chunks]  # the most relevant first, each one whole
    assert built.messages[-1]["content"].endswith(f"Question: {question}")
    assert built.prompt_tokens + built.max_tokens <= small.budget.max_model_len
    assert built.prompt_tokens == small.counter.count_exact(built.messages)


def test_refused_only_when_the_bare_question_cannot_fit(small: PromptBuilder) -> None:
    question = words(random.Random(5), 1500)
    with pytest.raises(GatewayError) as info:
        small.build(request(history(2), question, chunks(1, 20), max_tokens=128))
    error = info.value
    assert error.code == "prompt_too_large"
    assert error.details["limit"] == small.budget.max_model_len - 128
    assert f"at most {small.budget.max_model_len - 128} fit in max_model_len 1024" in error.message


def test_system_messages_over_their_category_are_refused_naming_the_limit(small: PromptBuilder) -> None:
    system = {"role": "system", "content": words(random.Random(6), 200)}
    body = {"messages": [system, {"role": "user", "content": "hi"}]}
    with pytest.raises(GatewayError) as info:
        small.build(InvocationRequest.model_validate(body))
    assert (info.value.code, info.value.details) == ("system_too_large", {"field": "messages", "limit": 250})


def test_the_summary_takes_the_markers_place_bounded_to_its_category(small: PromptBuilder) -> None:
    draft = small.draft(request(history(12), "and then?", []))
    assert draft.dropped_turns > 0 and draft.summarized
    assert len(draft.summarized) == draft.dropped_turns  # the window's checkpoint: the summary stands for all
    long_summary = words(random.Random(8), 400)
    built = small.assemble(draft, SlotText(long_summary, "model"))
    slot = built.messages[1]
    assert slot["role"] == SUMMARY_ROLE == "user"  # quoted context, never the operator's system role
    assert slot["content"].startswith(f'[{draft.dropped_turns} earlier turns omitted]\n{SUMMARY_FRAME}"')
    assert slot["content"].endswith('"')
    assert small.counter.message(SUMMARY_ROLE, slot["content"]) <= small.budget.summary_tokens
    assert built.messages[0]["content"] == small.system_prompt.text
    assert built.history == {"dropped_turns": draft.dropped_turns, "summarized": True, "summary": "model"}
    assert built.history_header == f"summarized;turns={draft.dropped_turns};by=model"
    marker = small.assemble(draft, None)
    assert marker.messages[1] == {"role": "system", "content": f"[{draft.dropped_turns} earlier turns omitted]"}
    assert (marker.summary, marker.history_header) == (MARKER, f"trimmed;turns={draft.dropped_turns}")
    assert marker.messages[2:] == built.messages[2:]


def test_between_slides_the_summarized_turns_do_not_change(small: PromptBuilder) -> None:
    past = history(30, seed=9, size=8)
    keys = []
    for turns in range(8, 30):
        draft = small.draft(request(past[: 2 * turns], "next?", []))
        keys.append((len(draft.summarized), draft.previous))
    slides = sum(1 for a, b in itertools.pairwise(keys) if a != b)
    assert 0 < slides <= len(keys) // 3, keys  # the summary is redone at checkpoints only
    assert all(previous < summarized for summarized, previous in keys if previous)


@pytest.mark.parametrize("seed", range(30))
def test_prompt_plus_max_tokens_never_exceeds_max_model_len(small: PromptBuilder, seed: int) -> None:
    rng = random.Random(seed)
    context = chunks(rng.randint(0, 5), rng.randint(5, 60), seed)
    question = words(rng, rng.randint(1, 700))
    max_tokens = rng.choice([1, 64, 128])
    try:
        past = history(rng.randint(0, 20), seed, rng.randint(5, 60))
        draft = small.draft(request(past, question, context, max_tokens))
    except GatewayError as exc:
        assert exc.code in ("prompt_too_large", "context_too_large")
        return
    built = small.assemble(draft, SlotText(words(rng, 300), "extractive") if draft.summarized else None)
    assert built.prompt_tokens + built.max_tokens <= small.budget.max_model_len
    assert built.prompt_tokens == small.counter.count_exact(built.messages)
    kept = kept_chunks(built.messages[-1]["content"], context)
    assert kept == context[: len(kept)]  # whole chunks, most relevant first
    if built.dropped_chunks:
        assert built.kept_turns == 0, "a chunk was cut while history was still there"
