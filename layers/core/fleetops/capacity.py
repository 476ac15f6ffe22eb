"""Capacity: how many instances a variant needs, and the scaling bounds and scheduled actions that set them."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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


_AT = re.compile(r"^at\((?P<local>[^)]+)\)$")


def at_schedule(local: datetime) -> str:
    """The ``at(...)`` expression Application Auto Scaling runs once, at ``local``'s wall-clock time in its zone.

    Examples
    --------
    >>> at_schedule(datetime(2026, 12, 4, 19, 0))
    'at(2026-12-04T19:00:00)'
    """
    return f"at({local:%Y-%m-%dT%H:%M:%S})"


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

    def runs_at(self) -> datetime | None:
        """When an ``at(...)`` schedule runs, in UTC; ``None`` for ``cron``/``rate`` or an unreadable one.

        Examples
        --------
        >>> action = ScheduledAction(name="a", endpoint_name="e", variant_name="v", schedule="at(2026-12-04T19:00:00)",
        ...                          timezone="Asia/Tokyo", min_capacity=8, max_capacity=12)
        >>> action.runs_at().isoformat()
        '2026-12-04T10:00:00+00:00'
        >>> action.model_copy(update={"schedule": "cron(0 18 ? * MON *)"}).runs_at() is None
        True
        """
        match = _AT.match(self.schedule.strip())
        if not match:
            return None
        try:
            local = datetime.fromisoformat(match.group("local"))
            zone = ZoneInfo(self.timezone or "UTC")
        except (ValueError, ZoneInfoNotFoundError):
            return None
        return (local if local.tzinfo else local.replace(tzinfo=zone)).astimezone(UTC)
