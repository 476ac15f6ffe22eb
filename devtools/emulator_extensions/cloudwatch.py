"""CloudWatch percentile statistics (``p95``, ``p99.9``...) in GetMetricData, added to moto 5.2.5 by this project.

moto computes Sum/Average/Minimum/Maximum/SampleCount only and answers ``None`` for a percentile
statistic. Here a percentile is computed with the nearest-rank method over the raw values in the
period, which is what CloudWatch does for values published one by one (it uses the same data for
``pNN`` on high-resolution and standard metrics). Tests that rely on it say so.
"""

from __future__ import annotations

import math
import re
from typing import SupportsFloat

from moto.cloudwatch.models import Statistics

_PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?)$")


def _percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


def install() -> None:
    """Patch moto's ``Statistics`` in this process (idempotent)."""
    if getattr(Statistics, "_fleet_patched", False):
        return
    original = Statistics.get_statistics_for_type

    def get_statistics_for_type(self: Statistics, stat: str) -> SupportsFloat | None:
        match = _PERCENTILE.fullmatch(stat)
        if match:
            return _percentile([float(v) for v in self.metric_single_values_list], float(match.group(1)))
        return original(self, stat)

    Statistics.get_statistics_for_type = get_statistics_for_type  # type: ignore[method-assign]
    Statistics._fleet_patched = True  # type: ignore[attr-defined]
