"""A bounded, thread-safe least-recently-used map (prepare threads read and write it beside the event loop)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    """At most ``entries`` items; the least recently used goes first.

    Examples
    --------
    >>> cache: BoundedLRU[str, str] = BoundedLRU(2)
    >>> cache.put("a", "A"); cache.put("b", "B"); _ = cache.get("a"); cache.put("c", "C")
    >>> cache.get("b") is None, cache.get("a"), len(cache)  # "b" was the least recently used
    (True, 'A', 2)
    """

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def items(self) -> list[tuple[K, V]]:
        """A snapshot, least recently used first."""
        with self._lock:
            return list(self._items.items())

    def __len__(self) -> int:
        return len(self._items)
