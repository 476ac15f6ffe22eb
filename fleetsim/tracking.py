"""Application Auto Scaling's target tracking with the template's policies (metric, target, cooldowns, read by
``fleetsim.stack``), approximated as AWS documents it, on one-minute simulated metrics.

- ``SageMakerVariantConcurrentRequestsPerModelHighResolution``: concurrent requests in the model containers per
  serving instance, queued ones included, from six 10-second datapoints a minute. The scale-out alarm needs 3
  consecutive datapoints above the target, so a minute above the target scales out within that minute.
- ``SageMakerVariantInvocationsPerInstance`` (one-minute datapoints): scale out after 3 minutes above the target.

Each policy scales out to ``ceil(metric total / target)``, and is ready to scale in the same way after 15
one-minute datapoints below 90 % of its target (high-resolution metrics scale in at the standard pace), its
scale-in cooldown past. With several policies on one scalable target, Application Auto Scaling scales out when
any policy is ready to, and scales in only when all of them are (to the largest count any of them asks for).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetsim.fleet import REQUEST_SECONDS, Minute, Scaler
from fleetsim.stack import CONCURRENT_REQUESTS_PER_MODEL, TargetTrackingSpec

#: 10-second datapoints per minute of a high-resolution metric, and how many in a row trip its scale-out alarm.
HIGH_RESOLUTION_DATAPOINTS = 6
HIGH_RESOLUTION_TO_ALARM = 3
STANDARD_HIGH_DATAPOINTS = 3
LOW_DATAPOINTS = 15
LOW_RATIO = 0.9


def concurrency(minute: Minute, request_seconds: float = REQUEST_SECONDS) -> float:
    """Concurrent requests in the variant's containers over ``minute``, summed over its instances.

    Little's law for the minute's arrivals (rate x time in the container) plus the requests still queued at its
    end: ``ConcurrentRequestsPerModel`` counts requests that wait inside the container, and the simulated queue
    is vLLM's waiting queue.
    """
    return minute.arrived / 60 * request_seconds + minute.queued


@dataclass
class TrackingPolicy:
    """One target-tracking policy: its two alarms (high and low) and its cooldowns."""

    spec: TargetTrackingSpec
    request_seconds: float = REQUEST_SECONDS
    _high: int = 0
    _low: int = 0
    _wanted: int = 1
    last_out: datetime | None = None
    last_in: datetime | None = None

    @property
    def high_resolution(self) -> bool:
        return self.spec.metric == CONCURRENT_REQUESTS_PER_MODEL

    @property
    def high_minutes(self) -> int:
        """Minutes above the target before the scale-out alarm fires."""
        if self.high_resolution:
            # 3 consecutive of a minute's six 10-second datapoints: one simulated minute above the target.
            return math.ceil(HIGH_RESOLUTION_TO_ALARM / HIGH_RESOLUTION_DATAPOINTS)
        return STANDARD_HIGH_DATAPOINTS

    def total(self, minute: Minute) -> float:
        """The tracked metric summed over the variant (per instance, it is divided by the serving count)."""
        return concurrency(minute, self.request_seconds) if self.high_resolution else float(minute.arrived)

    def observe(self, minute: Minute) -> None:
        target = self.spec.target
        total = self.total(minute)
        metric = total / max(1, minute.serving)
        self._high = self._high + 1 if metric > target else 0
        self._low = self._low + 1 if metric < LOW_RATIO * target else 0
        self._wanted = max(1, math.ceil(round(total / target, 9)))

    def out_to(self, desired: int, at: datetime) -> int | None:
        """The count it scales out to now, or None (alarm not firing, nothing to add, or cooling down)."""
        ready = self._high >= self.high_minutes and self._wanted > desired
        return self._wanted if ready and _cooled(self.last_out, at, self.spec.scale_out_cooldown_s) else None

    def in_to(self, desired: int, at: datetime) -> int | None:
        """The count it is ready to scale in to now, or None."""
        ready = self._low >= LOW_DATAPOINTS and self._wanted < desired
        return self._wanted if ready and _cooled(self.last_in, at, self.spec.scale_in_cooldown_s) else None


class TargetTracking:
    """The target-tracking policies of one scalable target, acting together as Application Auto Scaling does."""

    def __init__(
        self, *specs: TargetTrackingSpec, name: str = "target-tracking", request_seconds: float = REQUEST_SECONDS
    ) -> None:
        if not specs:
            raise ValueError("target tracking needs at least one policy")
        self.name = name
        self.policies = [TrackingPolicy(spec, request_seconds) for spec in specs]

    def before(self, at: datetime, scaler: Scaler) -> None:
        pass

    def after(self, minute: Minute, scaler: Scaler) -> None:
        # Acted on at the end of the minute, because the simulator steps per minute. A one-minute datapoint is
        # complete only then; a high-resolution alarm fires once 3 of its 10-second datapoints are above the
        # target, so the real request can come up to 30 s earlier than modelled here.
        at = minute.at + timedelta(minutes=1)
        for policy in self.policies:
            policy.observe(minute)
        out = [(p, n) for p in self.policies if (n := p.out_to(scaler.desired, at)) is not None]
        if out:
            scaler.set_desired(max(n for _, n in out))
            for policy, _ in out:
                policy.last_out = at
            return
        ready_in = [p.in_to(scaler.desired, at) for p in self.policies]
        if all(n is not None for n in ready_in):
            scaler.set_desired(max(n for n in ready_in if n is not None))
            for policy in self.policies:
                policy.last_in = at


def _cooled(last: datetime | None, at: datetime, cooldown_s: int) -> bool:
    return last is None or at - last >= timedelta(seconds=cooldown_s)
