"""What one instance really serves: its rate while vLLM had requests waiting, read from the variant's own metrics.

``capacity_rps_per_instance`` in fleet.yaml was measured once, for one model and one mix of conversations. A new
model version with longer answers, or longer conversations, serves fewer requests per instance, and every level
the planner sets divides demand by that figure: 30 % too high leaves every level 30 % short, and target tracking
fills the gap only after a queue has formed.

While vLLM has requests waiting (the container's ``QueueDepth``), its running batch is full and the instance
serves as fast as it can, so what it served in those minutes is the rate it really holds. SageMaker counts
arrivals (``InvocationsPerInstance``), not answers: in a minute whose queue grew, more arrived than were served,
by the queue's growth (on a real vLLM engine driven 1.15-1.4x past its rate, arrivals read a quarter more than
it served: ``make bench BENCH=served_rate``). So a minute's served rate is its arrivals less the growth of its
queue, read from the minutes either side of it, and the median of the latest such minutes replaces the
configured figure when it is clearly lower. One-minute points, not five: a five-minute point that holds a queue
for two of its minutes mixes them with three that were not full, and reads 10-15 % low.

It only ever lowers the figure: an instance that never queued shows no ceiling, and a figure too low costs GPU
hours, not requests (the README says how to measure it). It never goes below :data:`LOWEST_SHARE` of the
configured figure, so an incident (an engine stuck with a queue) cannot pin the fleet at its cap for a week.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetops.validation import StrictModel

#: Days of minutes read: nearly all CloudWatch keeps of one-minute points (15 days). Once the plan holds enough
#: instances, the queues it learned from become rare (a few noisy minutes a day), so the evidence must outlive a week.
READ_DAYS = 14
#: A minute is saturated when vLLM had at least this many requests waiting per instance, on average over it.
SATURATED_QUEUE_PER_INSTANCE = 2.0
#: Saturated minutes needed before the figure is trusted, and the latest this many are the ones it is taken from
#: (half an hour of queueing in all): a model that serves more or less than the one before shows within them.
MIN_SATURATED_MINUTES = 30
#: The served rate replaces the configured one only this far below it (closer is measurement noise).
LOWER_BELOW = 0.9
#: Never plans with less than this share of the configured figure.
LOWEST_SHARE = 0.5
#: The share of the served rate the plan counts on once lowered. Target tracking's InvocationsPerInstanceTarget
#: keeps instances at ~92 % of the configured rate, which is now above what they serve: it adds no margin, so the
#: plan keeps that margin itself.
PLANNED_SHARE = 0.9


@dataclass(frozen=True)
class MinuteLoad:
    """One minute of a variant: invocations per instance per second and requests waiting per instance."""

    at: datetime
    invocations_per_instance_rps: float
    queue_per_instance: float


#: A minute's neighbours in CloudWatch.
MINUTE = timedelta(minutes=1)


class ServedCapacity(StrictModel):
    """The per-instance rate a variant's plan divides demand by, and where it came from."""

    configured_rps: float
    served_rps: float | None = None  # the median of the latest saturated minutes; None with too few of them
    saturated_minutes: int = 0
    used_rps: float
    why: str

    @property
    def lowered(self) -> bool:
        return self.used_rps < self.configured_rps


def served_capacity(configured_rps: float, minutes: Sequence[MinuteLoad]) -> ServedCapacity:
    """The rate to plan with, from ``minutes`` (any order, any span).

    Examples
    --------
    A queue of 6 held for 32 minutes (the first and the last are only neighbours), each minute at 2.7, 2.8 or
    2.9 requests/s per instance:

    >>> from datetime import UTC
    >>> t = datetime(2026, 12, 4, tzinfo=UTC)
    >>> def queued(rates, queue=lambda i: 6.0, start=t):
    ...     return [MinuteLoad(start + i * MINUTE, rps, queue(i)) for i, rps in enumerate(rates)]
    >>> busy = queued((2.7, 2.8, 2.9) * 10 + (2.8, 2.8))
    >>> served_capacity(4.0, busy).used_rps  # 90 % of the median, 2.8
    2.52
    >>> served_capacity(4.0, busy[:31]).used_rps  # 29 saturated minutes with both neighbours are not enough
    4.0

    A queue growing by 60 requests per instance a minute: a rate of 3.5 arrived, 2.5 was served.

    >>> served_capacity(4.0, queued((3.5,) * 32, queue=lambda i: 2.0 + 60 * i)).served_rps
    2.5
    >>> served_capacity(4.0, queued((0.4,) * 32, queue=lambda i: 9.0)).used_rps  # a stuck engine: never under half
    2.0
    >>> faster = queued((3.8,) * 32, start=t + timedelta(days=1))  # a faster model since: the latest 30 count
    >>> served_capacity(4.0, busy + faster).used_rps
    4.0
    """
    by_time = {m.at: m for m in minutes}
    saturated: list[float] = []  # served rates, oldest first
    for minute in sorted(minutes, key=_at):
        before, after = by_time.get(minute.at - MINUTE), by_time.get(minute.at + MINUTE)
        if minute.queue_per_instance < SATURATED_QUEUE_PER_INSTANCE or before is None or after is None:
            continue
        growth = (after.queue_per_instance - before.queue_per_instance) / (2 * MINUTE.total_seconds())
        saturated.append(minute.invocations_per_instance_rps - growth)
    found = {"configured_rps": configured_rps, "saturated_minutes": len(saturated), "used_rps": configured_rps}
    if len(saturated) < MIN_SATURATED_MINUTES:
        why = f"{len(saturated)} minutes with a queue in {READ_DAYS} days, {MIN_SATURATED_MINUTES} needed: configured"
        return ServedCapacity(**found, why=why)
    served = round(statistics.median(saturated[-MIN_SATURATED_MINUTES:]), 3)
    if served >= LOWER_BELOW * configured_rps:
        return ServedCapacity(
            **found, served_rps=served, why=f"instances served {served:g}/s with a queue: the configured rate holds"
        )
    used = round(max(PLANNED_SHARE * served, LOWEST_SHARE * configured_rps), 3)
    why = (
        f"instances served {served:g}/s with a queue, against {configured_rps:g} configured: planning with {used:g}; "
        "measure and set capacity_rps_per_instance (and InvocationsPerInstanceTarget) for the model now serving"
    )
    return ServedCapacity(**{**found, "used_rps": used}, served_rps=served, why=why)


def _at(minute: MinuteLoad) -> datetime:
    return minute.at
