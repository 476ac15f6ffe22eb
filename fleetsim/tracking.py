"""Application Auto Scaling's target tracking with the template's metric, target and cooldowns (``fleetsim.stack``),
approximated as AWS documents it, on one-minute simulated metrics.

- ``SageMakerVariantConcurrentRequestsPerModelHighResolution`` (what the template tracks): concurrent requests in
  the model containers per serving instance, queued ones included, from six 10-second datapoints a minute. The
  scale-out alarm needs 3 consecutive datapoints above the target, so a minute above the target scales out
  within that minute.
- ``SageMakerVariantInvocationsPerInstance`` (one-minute datapoints): scale out after 3 minutes above the target.

Either scales out to ``ceil(metric total / target)``, and scales in the same way after 15 one-minute datapoints
below 90 % of the target (high-resolution metrics scale in at the standard pace), then its scale-in cooldown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetsim.fleet import Minute, Scaler
from fleetsim.stack import CONCURRENT_REQUESTS_PER_MODEL, TargetTrackingSpec

#: Mean seconds a request spends in the model container (prefill, its streamed answer to the last token), the
#: request-seconds behind ``ConcurrentRequestsPerInstanceTarget`` in templates/variant_remediation.yaml: TTFT ~0.25 s
#: plus the decode of an average answer, against the playbook's 5 s p95 answer latency. By Little's law an
#: instance at ``capacity_rps_per_instance`` (4/s) holds 4 x 3 = 12 requests; measure yours from
#: ``ConcurrentRequestsPerModel`` / (``Invocations`` per second per instance) on a quiet hour.
REQUEST_SECONDS = 3.0

#: 10-second datapoints per minute of a high-resolution metric, and how many in a row trip its scale-out alarm.
HIGH_RESOLUTION_DATAPOINTS = 6
HIGH_RESOLUTION_TO_ALARM = 3


def concurrency(minute: Minute, request_seconds: float = REQUEST_SECONDS) -> float:
    """Concurrent requests in the variant's containers over ``minute``, summed over its instances.

    Little's law for the minute's arrivals (rate x time in the container) plus the requests still queued at its
    end: ``ConcurrentRequestsPerModel`` counts requests that wait inside the container, and the simulated queue
    is vLLM's waiting queue.
    """
    return minute.arrived / 60 * request_seconds + minute.queued


@dataclass
class TargetTracking:
    spec: TargetTrackingSpec
    name: str = "target-tracking"
    request_seconds: float = REQUEST_SECONDS
    standard_high_datapoints: int = 3
    low_datapoints: int = 15
    low_ratio: float = 0.9
    _high: int = 0
    _low: int = 0
    _last_out: datetime | None = None
    _last_in: datetime | None = None

    @property
    def high_resolution(self) -> bool:
        return self.spec.metric == CONCURRENT_REQUESTS_PER_MODEL

    @property
    def high_minutes(self) -> int:
        """Minutes above the target before the scale-out alarm fires."""
        if self.high_resolution:
            # 3 consecutive of a minute's six 10-second datapoints: one simulated minute above the target.
            return math.ceil(HIGH_RESOLUTION_TO_ALARM / HIGH_RESOLUTION_DATAPOINTS)
        return self.standard_high_datapoints

    def total(self, minute: Minute) -> float:
        """The tracked metric summed over the variant (per instance, it is divided by the serving count)."""
        return concurrency(minute, self.request_seconds) if self.high_resolution else float(minute.arrived)

    def before(self, at: datetime, scaler: Scaler) -> None:
        pass

    def after(self, minute: Minute, scaler: Scaler) -> None:
        target = self.spec.target
        total = self.total(minute)
        metric = total / max(1, minute.serving)
        self._high = self._high + 1 if metric > target else 0
        self._low = self._low + 1 if metric < self.low_ratio * target else 0
        wanted = max(1, math.ceil(round(total / target, 9)))
        # Acted on at the end of the minute, because the simulator steps per minute. A one-minute datapoint is
        # complete only then; a high-resolution alarm fires once 3 of its 10-second datapoints are above the
        # target, so the real request can come up to 30 s earlier than modelled here.
        at = minute.at + timedelta(minutes=1)
        if self._high >= self.high_minutes and wanted > scaler.desired:
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
