"""The rollout's capacity task on an in-memory endpoint and scalable targets (no AWS): sizes, refusals, waits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from fleetops.rollout.step_capacity import CanaryLimitError, serving_users
from fleetops.rollout.step_sizing import CapacityDeps, handle, parse_capacity_request


@dataclass
class Endpoint:
    """In-memory DescribeEndpoint and counts: an asked-for count lands when ``land()`` is called (the update)."""

    counts: dict[str, int]
    weights: dict[str, float]
    status: str = "InService"
    desired: dict[str, int] = field(default_factory=dict)
    asked: list[tuple[str, int]] = field(default_factory=list)

    def describe(self, name: str) -> dict[str, Any]:
        return {
            "EndpointName": name,
            "EndpointStatus": self.status,
            "ProductionVariants": [
                {
                    "VariantName": v,
                    "CurrentInstanceCount": n,
                    "DesiredInstanceCount": self.desired.get(v, n),
                    "CurrentWeight": self.weights[v],
                }
                for v, n in self.counts.items()
            ],
        }

    def set_count(self, name: str, variant: str, count: int) -> None:
        self.asked.append((variant, count))
        self.desired[variant] = count
        self.status = "Updating"

    def land(self) -> None:
        self.counts |= self.desired
        self.desired = {}
        self.status = "InService"


@dataclass
class Targets:
    """In-memory scalable targets: variant -> (min, max)."""

    held: dict[str, tuple[int, int]] = field(default_factory=dict)
    released: list[str] = field(default_factory=list)

    def hold(self, endpoint_name: str, canary: str, baseline: str, min_capacity: int, max_capacity: int) -> bool:
        new = canary not in self.held
        self.held[canary] = (min_capacity, max_capacity)
        return new

    def max_capacity(self, endpoint_name: str, variant_name: str) -> int | None:
        target = self.held.get(variant_name)
        return None if target is None else target[1]

    def release(self, endpoint_name: str, canary: str) -> bool:
        self.released.append(canary)
        return self.held.pop(canary, None) is not None


def size(weight: float, max_canary: int = 12) -> dict[str, Any]:
    return {
        "action": "size_canary",
        "endpoint_name": "manga-chat",
        "canary_variant_name": "canary",
        "baseline_variant_name": "primary",
        "weight": weight,
        "floor": 2,
        "max_canary": max_canary,
    }


def test_a_canary_step_holds_the_target_at_the_size_asks_for_the_instances_and_is_ready_once_they_serve() -> None:
    endpoint = Endpoint(counts={"primary": 6, "canary": 1}, weights={"primary": 1.0, "canary": 0.0})
    targets = Targets()
    deps = CapacityDeps(endpoint.describe, endpoint.set_count, targets)

    first = handle(parse_capacity_request(size(25)), deps)

    # The canary at weight 0 serves no user: 25 % of the primary's 6 is 1.5, so 2.
    assert (first.variant, first.count, first.ready, first.serving_before) == ("canary", 2, False, 6)
    assert targets.held == {"canary": (2, 12)} and endpoint.asked == [("canary", 2)]
    # While the update runs, looking again asks for nothing more.
    waiting = handle(
        parse_capacity_request({"action": "ensure", "endpoint_name": "e", "variant": "canary", "count": 2}), deps
    )
    assert not waiting.ready and endpoint.asked == [("canary", 2)]
    endpoint.land()
    assert handle(
        parse_capacity_request({"action": "ensure", "endpoint_name": "e", "variant": "canary", "count": 2}), deps
    ).ready


def test_a_step_the_canary_limit_cannot_size_is_refused_before_anything_changes() -> None:
    endpoint = Endpoint(counts={"primary": 6, "canary": 4}, weights={"primary": 0.5, "canary": 0.5})
    targets = Targets(held={"canary": (4, 4)})
    deps = CapacityDeps(endpoint.describe, endpoint.set_count, targets)

    with pytest.raises(CanaryLimitError) as refused:
        handle(parse_capacity_request(size(75, max_canary=4)), deps)

    # What the operator reads in the rollout's cause: the step, the instances it needs, the limit.
    assert str(refused.value).startswith("step 75 % needs 8 canary instances (75 % of the 10 serving users on ")
    assert "canary_limits.max_instance_count 4" in str(refused.value)
    assert endpoint.asked == [] and targets.held == {"canary": (4, 4)}


def test_the_primary_grows_back_to_what_serves_users_up_to_its_max_before_the_promotion() -> None:
    endpoint = Endpoint(counts={"primary": 3, "canary": 4}, weights={"primary": 0.25, "canary": 0.75})
    targets = Targets(held={"primary": (2, 12)})
    deps = CapacityDeps(endpoint.describe, endpoint.set_count, targets)
    grow = {
        "action": "grow_primary",
        "endpoint_name": "e",
        "baseline_variant_name": "primary",
        "canary_variant_name": "canary",
    }

    grown = handle(parse_capacity_request(grow), deps)
    assert (grown.variant, grown.count, grown.ready) == ("primary", 7, False) and endpoint.asked == [("primary", 7)]

    targets.held["primary"] = (2, 5)  # a lower MaxCapacity bounds it
    endpoint.land()
    endpoint.counts["primary"] = 3
    assert handle(parse_capacity_request(grow), deps).count == 5


def test_release_deregisters_the_canary_target_and_says_when_there_was_none() -> None:
    endpoint = Endpoint(counts={"primary": 2}, weights={"primary": 1.0})
    targets = Targets(held={"canary": (1, 4)})
    deps = CapacityDeps(endpoint.describe, endpoint.set_count, targets)
    release = {"action": "release", "endpoint_name": "e", "canary_variant_name": "canary"}

    assert handle(parse_capacity_request(release), deps).note == "scalable target deregistered"
    assert handle(parse_capacity_request(release), deps).note == "no scalable target"
    assert targets.held == {}


def test_users_are_counted_on_the_variants_that_carry_traffic() -> None:
    live = Endpoint(counts={"primary": 6, "canary": 3}, weights={"primary": 0.5, "canary": 0.5}).describe("e")
    assert serving_users(live) == 9
    live["ProductionVariants"][1]["CurrentWeight"] = 0.0
    assert serving_users(live) == 6


def test_a_bad_capacity_request_names_the_field() -> None:
    with pytest.raises(ValueError, match="weight"):
        parse_capacity_request(size(100))  # the 100 % step promotes; it is never sized as a canary step
