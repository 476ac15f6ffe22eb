"""Application Auto Scaling's target tracking on ``InvocationsPerInstance`` with the template's target and cooldowns
(``fleetsim.stack``), approximated as AWS documents it: scale out after 3 one-minute datapoints above the target,
scale in after 15 below 90 % of it, to ``ceil(invocations / target)``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetsim.fleet import Minute, Scaler
from fleetsim.stack import TargetTrackingSpec


@dataclass
class TargetTracking:
    spec: TargetTrackingSpec
    name: str = "target-tracking"
    high_datapoints: int = 3
    low_datapoints: int = 15
    low_ratio: float = 0.9
    _high: int = 0
    _low: int = 0
    _last_out: datetime | None = None
    _last_in: datetime | None = None

    def before(self, at: datetime, scaler: Scaler) -> None:
        pass

    def after(self, minute: Minute, scaler: Scaler) -> None:
        target = self.spec.target_per_instance_per_minute
        metric = minute.invocations_per_instance
        self._high = self._high + 1 if metric > target else 0
        self._low = self._low + 1 if metric < self.low_ratio * target else 0
        wanted = max(1, math.ceil(round(minute.arrived / target, 9)))
        at = minute.at + timedelta(minutes=1)  # the datapoint is complete at the end of its minute
        if self._high >= self.high_datapoints and wanted > scaler.desired:
            if _cooled(self._last_out, at, self.spec.scale_out_cooldown_s):
                scaler.set_desired(wanted)
                self._last_out = at
        elif (
            self._low >= self.low_datapoints
            and wanted < scaler.desired
            and _cooled(self._last_in, at, self.spec.scale_in_cooldown_s)
        ):
            scaler.set_desired(wanted)
            self._last_in = at


def _cooled(last: datetime | None, at: datetime, cooldown_s: int) -> bool:
    return last is None or at - last >= timedelta(seconds=cooldown_s)
