"""One call repeated in a background thread while a block runs: users asking, a sampler reading the endpoint."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def repeating(
    call: Callable[[int], T], *, every_s: float, max_s: float = float("inf"), join_s: float = 70.0, name: str = "calls"
) -> Iterator[list[T]]:
    """``call(0)``, ``call(1)``, ... one after another, ``every_s`` apart, for at most ``max_s``; yields their results
    as they come and waits up to ``join_s`` for the call under way at the block's end."""
    results: list[T] = []
    stop = threading.Event()

    def run() -> None:
        deadline, i = time.monotonic() + max_s, 0
        while not stop.is_set() and time.monotonic() < deadline:
            results.append(call(i))
            i += 1
            stop.wait(every_s)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield results
    finally:
        stop.set()
        thread.join(timeout=join_s)
