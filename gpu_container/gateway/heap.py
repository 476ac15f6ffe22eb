"""The cyclic garbage collector kept off the requests' latency.

CPython's collector stops the event loop for the whole of each pass, and how long a pass takes grows with the
objects it walks. Two things made those passes long and frequent at 200 streams (250 requests a second,
measured with ``bench/gateway_overhead.py``):

- Start-up leaves some 75,000 tracked objects (uvicorn, Starlette, pydantic models, the chat template, aiohttp,
  httpx) that live as long as the process, and every full pass walked them all: a full pass came every few
  seconds and held every open stream for 15 ms on an idle core, over 100 ms on a busy one. They are frozen
  (``gc.freeze``) once start-up is over, after one collection, so that no start-up garbage is frozen with them.
- A request in flight holds some 175 tracked objects for its stream's whole length. At CPython's young threshold
  (700 net allocations) young passes ran many times a second, each one moved the streams in flight a generation
  older, and the older passes walked them again. Nearly every object of a request is freed by reference
  counting (no request leaves a reference cycle), so the collector has little to find: the young threshold is
  raised to :data:`YOUNG_THRESHOLD`, and a pass comes about once a minute instead.
"""

from __future__ import annotations

import gc

#: Net allocations of tracked objects between two young passes (CPython's default: 700). Cyclic garbage waits at
#: most this many allocations (a few MB) to be collected.
YOUNG_THRESHOLD = 50_000


def settle_heap() -> int:
    """Collect start-up's garbage, exempt what is left from later passes, and raise the young threshold.

    Returns how many objects are frozen. Call it once, when start-up is over.

    Examples
    --------
    >>> before = gc.get_threshold()
    >>> frozen = settle_heap()
    >>> frozen > 0, gc.get_threshold()[0]
    (True, 50000)
    >>> gc.unfreeze(); gc.set_threshold(*before)
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    return gc.get_freeze_count()
