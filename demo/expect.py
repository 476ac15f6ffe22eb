"""The demo's story checked as it is told: a part that ends unlike its story makes ``make demo`` exit 1.

Soft checks: the part goes on (the rest of the story still shows), the miss is printed where it happened and
listed again at the end.
"""

from __future__ import annotations

missed: list[str] = []


def expect(ok: bool, what: str) -> None:
    """Record ``what`` (the outcome the story promised) as missed unless ``ok``."""
    if not ok:
        missed.append(what)
        print(f"UNEXPECTED: {what}", flush=True)
