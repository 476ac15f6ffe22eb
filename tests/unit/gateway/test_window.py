"""The window's checkpoints with turns counted newest first: exact within the horizon, bounded and stable past it,
and the turns beyond it are never tokenized (through the prompt builder and the summarizer too)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.config import GatewayConfig, SummaryConfig
from gateway.metrics import GatewayMetrics
from gateway.prompt import COUNT_HORIZON_WINDOWS, PromptBuilder
from gateway.protocol import InvocationRequest
from gateway.summary import Pending, Summarizer
from gateway.tokens import TokenCounter
from gateway.window import plan_window, window_cuts

HIGH, LOW, HORIZON = 1200, 400, 4800


class RecordingCounter(TokenCounter):
    """The real counter, recording every text it tokenizes (to see which turns were counted)."""

    def __init__(self, model_dir: Path) -> None:
        self.texts: list[str] = []
        super().__init__(model_dir)

    def count_text(self, text: str) -> int:
        self.texts.append(text)
        return super().count_text(text)


def sizes_of(seed: int, turns: int) -> list[int]:
    rng = random.Random(seed)
    shape: Callable[[], int] = rng.choice([lambda: 100, lambda: rng.randint(30, 300), lambda: rng.randint(10, 80),
                                           lambda: int(rng.paretovariate(1.5) * 60)])  # fmt: skip
    return [shape() for _ in range(turns)]


@pytest.mark.parametrize("seed", range(8))
def test_within_the_horizon_the_checkpoints_are_the_walks(seed: int) -> None:
    sizes = sizes_of(seed, 60)
    for turns in range(len(sizes) + 1):
        if sum(sizes[:turns]) > HORIZON:
            break
        cuts = window_cuts(sizes[:turns], HIGH, LOW)
        window = plan_window(turns, sizes.__getitem__, HIGH, LOW, HORIZON)
        assert (window.start, window.previous) == (cuts[-1] if cuts else 0, cuts[-2] if len(cuts) > 1 else 0)
        assert window.sizes == sizes[:turns]


@pytest.mark.parametrize("seed", range(8))
def test_past_the_horizon_old_turns_are_never_counted_and_the_start_is_stable(seed: int) -> None:
    sizes = sizes_of(seed, 300)
    starts, walk = [], []
    for turns in range(1, len(sizes) + 1):
        asked: list[int] = []

        def size_of(index: int, asked: list[int] = asked) -> int:
            asked.append(index)
            return sizes[index]

        window = plan_window(turns, size_of, HIGH, LOW, HORIZON)
        assert len(asked) == len(set(asked)), "a turn was counted twice"
        assert sum(sizes[min(asked, default=turns) : turns]) <= HORIZON + HIGH + max(sizes), "counted too far back"
        kept = sum(sizes[window.start : turns])
        assert kept <= HIGH
        if window.start:
            assert kept + sizes[window.start - 1] > LOW, "dropped more than it had to"
            assert window.previous < window.start
        assert window.sizes[window.start :] == sizes[window.start : turns]
        starts.append(window.start)
        walk.append(plan_window(turns, sizes.__getitem__, HIGH, LOW, 10**9).start)  # every turn counted
    passed = next(turns for turns in range(len(sizes)) if sum(sizes[:turns]) > HORIZON)  # the first one past it
    back = [turns for turns, (a, b) in enumerate(itertools.pairwise(starts), start=2) if b < a]
    assert back in ([], [passed]), "the window went back (allowed once: when the session passes the horizon)"
    assert sum(sizes) > 2 * HORIZON  # most of the session is past the horizon
    slides = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    walk_slides = sum(1 for a, b in itertools.pairwise(walk) if a != b)
    assert slides <= 2 * walk_slides + 2, (slides, walk_slides)  # still checkpoints: most turns only append


@pytest.mark.parametrize("turn_tokens", [100, 266, 390, 599])
def test_past_the_horizon_equal_turns_move_the_start_as_rarely_as_the_walk(turn_tokens: int) -> None:
    """A session of equal turns (a long chat of similar questions) keeps close to the walk's checkpoints past the
    horizon: at the walk's own rate when its period is a power of two (four 266-token turns: the container test's
    session), at most 1.5x when it is not (a power-of-two index cannot follow a period of 3). Choosing among the
    starts that keep ``low`` or more moved the start every second turn in all of these."""
    sizes = [turn_tokens] * 120
    starts = [plan_window(turns, sizes.__getitem__, HIGH, LOW, HORIZON).start for turns in range(1, 121)]
    walk = [plan_window(turns, sizes.__getitem__, HIGH, LOW, 10**9).start for turns in range(1, 121)]
    moves = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    walk_moves = sum(1 for a, b in itertools.pairwise(walk) if a != b)
    assert moves <= 1.5 * walk_moves + 2, (moves, walk_moves)  # +2: passing the horizon
    if turn_tokens == 266:  # period 4
        assert moves <= walk_moves + 1


def test_previous_is_the_checkpoint_the_earlier_requests_had() -> None:
    sizes = sizes_of(3, 200)
    for turns in range(120, 200):
        window = plan_window(turns, sizes.__getitem__, HIGH, LOW, HORIZON)
        earlier = [plan_window(k, sizes.__getitem__, HIGH, LOW, HORIZON).start for k in range(turns - 1, 0, -1)]
        changed = next((start for start in earlier if start != window.start), 0)
        assert window.previous == changed


FILLER = "which volume ships next week and is the preorder open for the box set please tell me about shipping"


def long_session(turns: int) -> list[dict[str, str]]:
    out = []
    for i in range(turns):
        out += [{"role": "user", "content": f"old turn {i:03d}: {FILLER}"},
                {"role": "assistant", "content": f"old answer {i:03d}: {FILLER}"}]  # fmt: skip
    return out


@pytest.mark.parametrize("mode", ["model", "extractive"])
def test_turns_beyond_the_horizon_are_never_tokenized(tokenizer_dir: Path, config: GatewayConfig, mode: str) -> None:
    counter = RecordingCounter(tokenizer_dir)
    builder = PromptBuilder(counter, config.system_prompt, config.budget)
    summarizer = Summarizer(SummaryConfig(mode=mode), builder, GatewayMetrics())
    request = InvocationRequest.model_validate(
        {"messages": [{"role": "user", "content": "and next?"}], "history": long_session(300)}
    )
    counter.texts.clear()
    draft = builder.draft(request)
    ready = summarizer.ready(draft, "base")
    assert isinstance(ready, Pending) if mode == "model" else ready is not None
    built = builder.assemble(draft, None)

    counted = {int(t.split("turn ")[1][:3]) for t in counter.texts if "old turn " in t}
    kept = {int(m["content"][9:12]) for m in built.messages if m["content"].startswith("old turn ")}
    assert kept and max(kept) == 299
    turn_tokens = counter.message("user", long_session(1)[0]["content"]) * 2  # about one turn's tokens
    reach = (COUNT_HORIZON_WINDOWS + 1) * config.budget.history_high_tokens // turn_tokens + 2
    assert min(counted) >= 300 - reach, f"turn {min(counted)} was tokenized: only the newest {reach} may be"
    assert len(counted) < 300 // 2
    assert built.prompt_tokens == counter.count_exact(built.messages)  # what was counted is still exact
