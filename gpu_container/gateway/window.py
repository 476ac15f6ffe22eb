"""Where the history window starts: stable checkpoints, with turns counted newest first and only as far as needed.

The window is computed from the conversation alone (the gateway keeps no session state). Walking the turns
oldest first (:func:`window_cuts`), history may grow to ``high`` tokens; when a turn pushes it over, the
oldest turns go at once until it is at most ``low``. Replaying the walk on the next request gives the same
cut points, so most turns only append to the previous prompt and the prefix changes only at checkpoints.

That walk needs the size of every turn, and counting a turn means tokenizing it: a client could send a
history of many large turns that the window drops anyway. So turns are counted newest first and only up to
``horizon`` tokens (:func:`plan_window`):

- A history within the horizon is walked exactly as above (every realistic session: the horizon is several
  windows long).
- Past it, the turns beyond the horizon are never tokenized, and the start is the *roundest* turn index (the
  one with the most trailing zero bits, the oldest on a tie) among the starts the walk could hold: at most
  ``high`` tokens kept, and no fewer than the most recent turns within ``low`` (what the walk keeps right
  after a slide). The wider that range, the rarer a rounder index enters it: with equal turns it moves as
  often as the walk does. That choice needs only the newest turns, never goes back, and stays put until the window
  overflows or a rounder index comes into range, so the prefix still changes only at checkpoints (a little
  more often than the walk's, and once more when a session first passes the horizon).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


def window_cuts(turn_tokens: list[int], high: int, low: int) -> list[int]:
    """Every checkpoint of the window, oldest first: the first kept turn after each slide.

    Examples
    --------
    >>> window_cuts([100] * 10, high=500, low=250)  # slides at the 6th and the 10th turn
    [4, 8]
    """
    cuts: list[int] = []
    start, total = 0, 0
    for index, tokens in enumerate(turn_tokens):
        total += tokens
        if total > high:
            while total > low and start <= index:
                total -= turn_tokens[start]
                start += 1
            cuts.append(start)
    return cuts


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
    cuts = window_cuts(turn_tokens, high, low)
    return cuts[-1] if cuts else 0


def roundest(first: int, last: int) -> int:
    """The index in ``[first, last]`` with the most trailing zero bits (unique: between two such is a rounder).

    Examples
    --------
    >>> roundest(5, 7), roundest(5, 8), roundest(9, 15), roundest(3, 3)
    (6, 8, 12, 3)
    """
    best, zeros = first, -1
    for index in range(first, last + 1):
        index_zeros = (index & -index).bit_length() - 1 if index else 64
        if index_zeros > zeros:
            best, zeros = index, index_zeros
    return best


@dataclass(frozen=True)
class Window:
    """The window over ``len(sizes)`` turns.

    ``start`` is the first kept turn, ``previous`` the checkpoint before it (0 when none), ``sizes`` each
    turn's tokens, 0 for a turn never counted (only turns before ``start`` go uncounted), ``counted`` how
    many turns, newest first, were counted.
    """

    start: int
    previous: int
    sizes: list[int]
    counted: int


class _Sizes:
    """Turn sizes counted on demand, newest first; ``after[i]`` is the tokens of turns ``i..n-1``."""

    def __init__(self, turns: int, size_of: Callable[[int], int]) -> None:
        self.size_of = size_of
        self.first = turns  # turns[first:] are counted
        self.sizes = [0] * turns
        self.after = [0] * (turns + 1)

    def back_to(self, index: int) -> None:
        while self.first > index:
            self.first -= 1
            self.sizes[self.first] = self.size_of(self.first)
            self.after[self.first] = self.after[self.first + 1] + self.sizes[self.first]

    def within(self, end: int, horizon: int) -> bool:
        """Whether ``turns[:end]`` take at most ``horizon`` tokens (counting back only until they do not)."""
        while self.first > 0 and self.after[self.first] - self.after[end] <= horizon:
            self.back_to(self.first - 1)
        return self.after[self.first] - self.after[end] <= horizon


def plan_window(turns: int, size_of: Callable[[int], int], high: int, low: int, horizon: int) -> Window:
    """The window over ``turns`` turns whose sizes ``size_of(index)`` gives, counting newest first.

    ``horizon`` (above ``high``) bounds what is counted: ``size_of`` is called at most once per turn, and
    never for a turn beyond ``horizon + high`` tokens of the newest turns (the horizon, and the turns that
    tell where the previous checkpoint was). See the module's docstring.

    Examples
    --------
    Within the horizon, the walk's checkpoints; past it, the roundest start that keeps at most 500 tokens and
    no fewer than the walk after a slide (turn 28: 200 tokens, as the walk), and the eight oldest turns are
    never counted:

    >>> plan_window(10, lambda i: 100, high=500, low=250, horizon=2000)
    Window(start=8, previous=4, sizes=[100, 100, 100, 100, 100, 100, 100, 100, 100, 100], counted=10)
    >>> window = plan_window(30, lambda i: 100, high=500, low=250, horizon=2000)
    >>> window.start, window.previous, window.counted, window.sizes[:4]
    (28, 24, 22, [0, 0, 0, 0])
    """
    counted = _Sizes(turns, size_of)
    if counted.within(turns, horizon):
        cuts = window_cuts(counted.sizes, high, low)
        return Window(cuts[-1] if cuts else 0, cuts[-2] if len(cuts) > 1 else 0, counted.sizes, turns)
    start = _bounded_start(counted, turns, high, low)
    previous = 0
    for end in range(turns - 1, 0, -1):  # the start of the shorter histories earlier requests sent
        if counted.within(end, horizon):
            cuts = [cut for cut in window_cuts(counted.sizes[:end], high, low) if cut < start]
            previous = cuts[-1] if cuts else 0
            break
        earlier = _bounded_start(counted, end, high, low)
        if earlier != start:
            previous = earlier if earlier < start else 0
            break
    return Window(start, previous, counted.sizes, turns - counted.first)


def _bounded_start(counted: _Sizes, end: int, high: int, low: int) -> int:
    """The roundest start for ``turns[:end]`` among those the walk could hold: keeping at most ``high`` tokens, and
    no fewer than the walk keeps right after a slide (the most recent turns within ``low``). At least one turn
    over ``high`` lies before it: the caller checked that the history passes the horizon."""
    first, total, last = end, 0, end
    while first > 0:
        counted.back_to(first - 1)
        if total + counted.sizes[first - 1] > high:
            break
        first -= 1
        total += counted.sizes[first]
        if total <= low:
            last = first
    return roundest(first, max(first, min(last, end - 1)))  # one turn at least, unless it alone passes high
