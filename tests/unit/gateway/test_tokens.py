"""The per-message token-count cache: what it keeps stays small whatever clients send, and its counts stay exact."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

from gateway.tokens import MessageCountCache, TokenCounter

#: Characters of each message: under the old per-text limit (16,384), so a text-keyed cache would keep them.
CHARS = 16000
#: An astral character: Python stores a string holding one at 4 bytes per character.
BOOK = "\U0001f4da"


def big_message(seed: int) -> str:
    return f"{seed} " + (BOOK + "漫画") * (CHARS // 3)


def test_many_large_non_ascii_messages_leave_only_digests_behind(tokenizer_dir: Path) -> None:
    counter = TokenCounter(tokenizer_dir, cache_size=1000)
    entries = len(counter.cache)  # the start-up probes'
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for seed in range(40):  # about 2.5 MB of text, each message gone once counted
            counter.message("user", big_message(seed))
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(counter.cache) == entries + 40
    # A cache keyed by the text would hold 40 x 64 KB here; digests take a few dozen bytes each.
    assert retained < 64 * 1024, f"the cache kept {retained} bytes for 40 messages"
    assert counter.cache.nbytes <= (entries + 40) * 100


def test_the_cache_stays_within_its_entries_and_its_keys_are_fixed_size() -> None:
    cache = MessageCountCache(entries=8)
    for seed in range(100):
        cache.put(cache.key("user", big_message(seed)), seed)
    assert len(cache) == 8
    assert cache.nbytes <= 8 * (sys.getsizeof(cache.key("user", "")) + sys.getsizeof(10**6))
    assert sys.getsizeof(cache.key("user", big_message(0))) == sys.getsizeof(cache.key("user", "a")) < 64
    assert cache.get(cache.key("user", big_message(99))) == 99  # the newest stay
    assert cache.get(cache.key("user", big_message(0))) is None  # the least recently used went first


def test_cached_counts_stay_exact_for_long_messages_and_roles(counter: TokenCounter) -> None:
    empty = counter.count_exact([], add_generation_prompt=False)
    long_text = "ships next week " * 3000  # longer than any old per-text limit: now cached too
    for role, text in [("user", long_text), ("assistant", long_text), ("user", "a short one")]:
        exact = counter.count_exact([{"role": role, "content": text}], add_generation_prompt=False) - empty
        assert counter.message(role, text) == exact
        assert counter.message(role, text) == exact  # the second time from the cache
    assert counter.cache.key("user", "x") != counter.cache.key("assistant", "x")
    assert counter.cache.key("user", "\ud800") != counter.cache.key("user", "\udc00")  # JSON allows lone surrogates
