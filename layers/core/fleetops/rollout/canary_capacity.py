"""How many instances a canary needs at a step's weight, and what the primary keeps meanwhile.

At each step the canary gets its share of what served users just before the step: the primary's serving count
times the weight, rounded up, with the headroom the primary already ran with (the serving count is what the
scaling policies chose for the whole traffic). The primary keeps enough for the rest, rounded up, so the two
together never hold fewer instances than served users before the step. A canary larger than fleet.yaml's
``canary_limits.max_instance_count`` is held at that maximum and the size says so (``limited``): the step then
sends the canary more than its instances were sized for, which the rollout refuses before shifting traffic.

Examples
--------
>>> canary_size(serving=8, weight=50, floor=2, max_canary=12)
CanarySize(canary=4, primary=4, limited=False)
>>> canary_size(serving=8, weight=5, floor=2, max_canary=12)
CanarySize(canary=1, primary=8, limited=False)
>>> canary_size(serving=6, weight=75, floor=2, max_canary=3)
CanarySize(canary=3, primary=2, limited=True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CanarySize:
    canary: int  # the canary variant's instance count (and its scalable target's MinCapacity) at this step
    primary: int  # the least the primary keeps (its MinCapacity while the step runs)
    limited: bool  # the canary's share needed more than canary_limits allow


def _share(serving: int, fraction: float) -> int:
    return math.ceil(round(serving * fraction, 9))  # round first: 8 x 0.25 is 2, not 2.0000000001 -> 3


def canary_size(*, serving: int, weight: float, floor: int, max_canary: int) -> CanarySize:
    """The sizes for a step sending ``weight`` percent (0 < weight < 100) of users to the canary.

    Raises
    ------
    ValueError
        For a weight outside (0, 100): at 100 the rollout promotes instead (the primary's instances take the new
        model), and at 0 there is no canary traffic to size for.
    """
    if not 0 < weight < 100:
        raise ValueError(f"a canary step's weight must be in (0, 100), got {weight}")
    wanted = max(1, _share(max(serving, 1), weight / 100))
    primary = max(floor, _share(max(serving, 1), 1 - weight / 100))
    return CanarySize(canary=min(wanted, max_canary), primary=primary, limited=wanted > max_canary)
