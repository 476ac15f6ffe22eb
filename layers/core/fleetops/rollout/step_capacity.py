"""Capacity before a rollout step moves users: the canary sized to the step's weight, the primary grown to promote.

Read from DescribeEndpoint (``live``) just before the step's weights change:

- a canary step sizes the canary with :func:`fleetops.rollout.canary_capacity.canary_size` from the instances that
  serve users now (every variant with a weight above 0); a size over ``canary_limits.max_instance_count`` is refused
  here, before any instance or weight changes (:class:`CanaryLimitError`);
- the promotion (the 100 % step) first grows the primary back to what serves users (the primary and the canary
  together, up to the primary's MaxCapacity), so the primary's instances can take the new model and the whole
  traffic when the canary goes;
- a step moves users only once the variant it waits for runs that many instances and the endpoint is InService
  (:func:`serving`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetops.rollout.canary_capacity import CanarySize, canary_size


class CanaryLimitError(RuntimeError):
    """The step's canary needs more instances than ``canary_limits`` allow: refused before its weights change."""


def _variants(live: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(live.get("ProductionVariants", []))


def current_count(live: Mapping[str, Any], variant_name: str) -> int:
    """The variant's ``CurrentInstanceCount`` (0 when it is absent or SageMaker does not say)."""
    for variant in _variants(live):
        if variant.get("VariantName") == variant_name:
            return int(variant.get("CurrentInstanceCount") or 0)
    return 0


def desired_count(live: Mapping[str, Any], variant_name: str) -> int:
    """The count the variant is going to (``DesiredInstanceCount``, else its current one)."""
    for variant in _variants(live):
        if variant.get("VariantName") == variant_name:
            return int(variant.get("DesiredInstanceCount") or variant.get("CurrentInstanceCount") or 0)
    return 0


def serving_users(live: Mapping[str, Any]) -> int:
    """Instances that serve users now: those of every variant with a weight above 0.

    A canary at weight 0 (before its first step) serves no user, so it does not count.

    Examples
    --------
    >>> serving_users({"ProductionVariants": [
    ...     {"VariantName": "primary", "CurrentInstanceCount": 6, "CurrentWeight": 0.75},
    ...     {"VariantName": "canary", "CurrentInstanceCount": 2, "CurrentWeight": 0.25}]})
    8
    >>> serving_users({"ProductionVariants": [
    ...     {"VariantName": "primary", "CurrentInstanceCount": 6, "CurrentWeight": 1.0},
    ...     {"VariantName": "canary", "CurrentInstanceCount": 1, "CurrentWeight": 0.0}]})
    6
    """
    return sum(
        int(v.get("CurrentInstanceCount") or 0) for v in _variants(live) if float(v.get("CurrentWeight") or 0) > 0
    )


def size_step(
    live: Mapping[str, Any], *, endpoint_name: str, weight: float, floor: int, max_canary: int
) -> tuple[int, CanarySize]:
    """What serves users now and the canary's size at ``weight``; refuse a size over ``max_canary``.

    Raises
    ------
    CanaryLimitError
        Naming the step, the instances it needs and the limit.

    Examples
    --------
    >>> live = {"ProductionVariants": [{"VariantName": "primary", "CurrentInstanceCount": 6, "CurrentWeight": 1.0}]}
    >>> size_step(live, endpoint_name="e", weight=25, floor=2, max_canary=4)
    (6, CanarySize(canary=2, primary=5, limited=False))
    >>> size_step(live, endpoint_name="e", weight=75, floor=2, max_canary=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fleetops.rollout.step_capacity.CanaryLimitError: step 75 % needs 5 canary instances ...
    """
    serving = serving_users(live)
    size = canary_size(serving=serving, weight=weight, floor=floor, max_canary=max_canary)
    if size.limited:
        needed = canary_size(serving=serving, weight=weight, floor=floor, max_canary=10**6).canary
        raise CanaryLimitError(
            f"step {weight:g} % needs {needed} canary instances ({weight:g} % of the {serving} serving users on "
            f"{endpoint_name!r}), above fleet.yaml canary_limits.max_instance_count {max_canary}: the step was "
            "refused before its weights changed; raise the limit or roll out when fewer instances serve"
        )
    return serving, size


def primary_need(live: Mapping[str, Any], *, max_primary: int | None) -> int:
    """Instances the primary needs before it takes every user back: what serves users now, up to its max.

    Examples
    --------
    >>> live = {"ProductionVariants": [
    ...     {"VariantName": "primary", "CurrentInstanceCount": 2, "CurrentWeight": 0.25},
    ...     {"VariantName": "canary", "CurrentInstanceCount": 5, "CurrentWeight": 0.75}]}
    >>> primary_need(live, max_primary=12), primary_need(live, max_primary=6)
    (7, 6)
    """
    serving = serving_users(live)
    return serving if max_primary is None else min(serving, max_primary)


def serving(live: Mapping[str, Any], variant_name: str, count: int) -> bool:
    """The endpoint is InService and the variant runs at least ``count`` instances.

    Examples
    --------
    >>> live = {"EndpointStatus": "InService", "ProductionVariants": [{"VariantName": "c", "CurrentInstanceCount": 3}]}
    >>> serving(live, "c", 3), serving(live, "c", 4), serving(live | {"EndpointStatus": "Updating"}, "c", 1)
    (True, False, False)
    """
    return live.get("EndpointStatus") == "InService" and current_count(live, variant_name) >= count
