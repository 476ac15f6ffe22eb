"""The canary's size at each step follows its weight; the primary keeps the rest; nothing shrinks below what
served users before the step (fleetops.rollout.canary_capacity)."""

from __future__ import annotations

import pytest

from fleetops.rollout.canary_capacity import canary_size
from fleetops.rollout.request_schema import DEFAULT_STEPS


@pytest.mark.parametrize("serving", [1, 2, 3, 6, 8, 12, 40])
@pytest.mark.parametrize("weight", [w for w in DEFAULT_STEPS if w < 100] + [1, 33, 99])
def test_the_two_variants_together_never_hold_fewer_instances_than_served_users_before_the_step(
    serving: int, weight: int
) -> None:
    size = canary_size(serving=serving, weight=weight, floor=1, max_canary=100)

    assert size.canary + size.primary >= serving
    assert size.canary >= serving * weight / 100 and size.primary >= serving * (100 - weight) / 100
    assert not size.limited


def test_on_a_primary_of_six_the_canary_follows_each_default_step() -> None:
    sizes = [canary_size(serving=6, weight=w, floor=2, max_canary=12) for w in DEFAULT_STEPS if w < 100]

    assert [(s.canary, s.primary) for s in sizes] == [(1, 6), (2, 5), (3, 3), (5, 2)]


def test_a_canary_over_its_limit_is_held_there_and_says_so() -> None:
    size = canary_size(serving=8, weight=50, floor=2, max_canary=1)

    assert (size.canary, size.limited) == (1, True)


@pytest.mark.parametrize("weight", [0, 100, -5, 150])
def test_a_weight_outside_a_canary_step_is_refused(weight: int) -> None:
    with pytest.raises(ValueError, match="must be in \\(0, 100\\)"):
        canary_size(serving=4, weight=weight, floor=1, max_canary=4)
