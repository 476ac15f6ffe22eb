"""Capacity: how many instances a variant needs, and the scaling bounds and scheduled actions that set them."""

from __future__ import annotations

import math

from fleetops.config import VariantConfig
from fleetops.validation import StrictModel


def instances_for(variant: VariantConfig, multiplier: float) -> int:
    """ceil(baseline x multiplier / per-instance capacity x headroom), clamped to [floor, cap].

    Examples
    --------
    >>> v = VariantConfig(name="p", capacity_rps_per_instance=5, baseline_rps=10, headroom=1.2, floor=2, cap=8)
    >>> instances_for(v, 1.0), instances_for(v, 3.0), instances_for(v, 0.1), instances_for(v, 10.0)
    (3, 8, 2, 8)
    """
    # round() first so that float noise (e.g. 10 * 1.2 = 12.000000000000002) does not add an instance.
    need = math.ceil(round(variant.baseline_rps * multiplier / variant.capacity_rps_per_instance * variant.headroom, 9))
    return max(variant.floor, min(variant.cap, need))


class ScalableTarget(StrictModel):
    """A variant's Application Auto Scaling bounds."""

    min_capacity: int
    max_capacity: int


class ScheduledAction(StrictModel):
    """A scheduled action as Application Auto Scaling stores it (``at(...)`` in ``timezone``)."""

    name: str
    endpoint_name: str
    variant_name: str
    schedule: str
    timezone: str
    min_capacity: int
    max_capacity: int
