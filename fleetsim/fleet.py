"""One SageMaker variant, minute by minute: Application Auto Scaling's capacity, instances that take minutes to
arrive, a bounded queue, and what users saw.

The model, and what it leaves out:
- ``Scaler`` is the scalable target: MinCapacity, MaxCapacity and the desired count, clamped as Application
  Auto Scaling clamps it (raising MinCapacity raises the desired count at once; lowering it does not lower it).
- Each launched instance takes a provisioning delay drawn from ``provisioning_s`` (SageMaker's 5-8 minutes)
  plus ``container_ready_s`` (the container's start to a healthy ``/ping``) before it serves. The delay is
  drawn from the seed, the launch's minute and its order within that minute, so policies compare on equal
  luck. Scale-in removes instances still provisioning first, then serving ones, and takes effect at once.
- Every serving instance handles ``capacity_rps_per_instance`` (fleet.yaml: the rate at target latency). What
  a minute cannot serve waits in a FIFO queue; a request that would wait longer than ``max_queue_wait_s``
  (SageMaker's 60 s invocation timeout) fails, as the 429s and timeouts users saw.
- Billing counts every launched instance, provisioning or serving, per minute.
- One pool for the variant: no per-instance imbalance, no request-length mix, no instance failures.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from fleetsim.traffic import TICK_S, Trace

#: Mean seconds a request spends in the model container (prefill, its streamed answer to the last token), the
#: request-seconds behind ``ConcurrentRequestsPerInstanceTarget`` in templates/variant_remediation.yaml: TTFT ~0.25 s
#: plus the decode of an average answer, against the playbook's 5 s p95 answer latency. By Little's law an
#: instance at ``capacity_rps_per_instance`` (4/s) holds 4 x 3 = 12 requests; measure yours from
#: ``ConcurrentRequestsPerModel`` / (``Invocations`` per second per instance) on a quiet hour.
REQUEST_SECONDS = 3.0


@dataclass(frozen=True)
class FleetParams:
    """The world's instances: what each really serves (a scenario may make it differ from fleet.yaml's figure)."""

    capacity_rps_per_instance: float
    request_seconds: float = REQUEST_SECONDS  # longer answers: fewer requests per instance, more of them in it
    provisioning_s: tuple[int, int] = (300, 480)
    container_ready_s: int = 75  # vLLM on an A10G: weights ~15 s, CUDA graphs ~30 s, warm-up ~10 s
    max_queue_wait_s: float = 60.0
    degraded_wait_s: float = 1.0  # a minute whose queue makes people wait longer than this is degraded

    def __post_init__(self) -> None:
        low, high = self.provisioning_s
        if not 0 <= low <= high:
            raise ValueError(f"provisioning_s must be (low, high) with 0 <= low <= high, got {self.provisioning_s}")

    @property
    def per_instance_per_tick(self) -> float:
        return self.capacity_rps_per_instance * TICK_S

    @property
    def fastest_arrival_s(self) -> int:
        return self.provisioning_s[0] + self.container_ready_s


@dataclass
class Scaler:
    """The variant's scalable target as Application Auto Scaling keeps it."""

    min_capacity: int
    max_capacity: int
    desired: int

    def set_range(self, min_capacity: int, max_capacity: int) -> None:
        self.min_capacity, self.max_capacity = min_capacity, max_capacity
        self.desired = min(max(self.desired, min_capacity), max_capacity)

    def set_desired(self, desired: int) -> None:
        self.desired = min(max(desired, self.min_capacity), self.max_capacity)


@dataclass(frozen=True)
class Minute:
    """What happened in one minute of one policy's run."""

    at: datetime
    arrived: int
    served: int
    failed: int
    queued: float  # waiting at the end of the minute
    wait_s: float  # how long the last request queued in this minute will wait
    serving: int  # instances in service
    billed: int  # instances launched, serving or still provisioning
    desired: int
    min_capacity: int

    @property
    def queue_per_instance(self) -> float:
        """vLLM's ``num_requests_waiting`` averaged over instances: the ``QueueDepth`` metric."""
        return self.queued / self.serving if self.serving else self.queued

    @property
    def invocations_per_instance(self) -> float:
        """SageMaker's ``InvocationsPerInstance`` for the minute (every arrival counts, failed or not)."""
        return self.arrived / max(1, self.serving)


class Policy(Protocol):
    """Drives a :class:`Scaler`: ``before`` sees the clock (schedules), ``after`` sees each minute's metrics."""

    name: str

    def before(self, at: datetime, scaler: Scaler) -> None: ...

    def after(self, minute: Minute, scaler: Scaler) -> None: ...


@dataclass
class _Instances:
    ready_at: list[float] = field(default_factory=list)  # seconds from the start, one per launched instance

    def serving(self, start_s: float, end_s: float) -> tuple[int, float]:
        """Instances serving some of ``[start_s, end_s)``, and their capacity in instance-minutes."""
        ready = [r for r in self.ready_at if r < end_s]
        return len(ready), sum(min(1.0, (end_s - max(r, start_s)) / (end_s - start_s)) for r in ready)

    def resize(self, desired: int, now_s: float, seed: int, params: FleetParams) -> None:
        launched = 0
        while len(self.ready_at) < desired:
            # Drawn from the launch's minute and order, not from a stream: two policies that launch at the same
            # minute get the same instances, so their runs differ by their decisions, not by luck.
            delay = random.Random(f"{seed}:{now_s:.0f}:{launched}").uniform(*params.provisioning_s)
            self.ready_at.append(now_s + delay + params.container_ready_s)
            launched += 1
        if len(self.ready_at) > desired:
            self.ready_at.sort()  # the latest to be ready go first: provisioning ones before serving ones
            del self.ready_at[desired:]


class Variant:
    """One variant's instances and queue, stepped a minute at a time under its policy."""

    def __init__(self, policy: Policy, scaler: Scaler, params: FleetParams, *, seed: int) -> None:
        self.policy, self.scaler, self.params, self.seed = policy, scaler, params, seed
        self.instances = _Instances([0.0] * scaler.desired)  # what ``scaler.desired`` names at the start serves
        self.queued = 0.0
        self.minutes: list[Minute] = []

    @property
    def serving(self) -> int:
        """Instances serving at the end of the last minute stepped."""
        return self.minutes[-1].serving if self.minutes else len(self.instances.ready_at)

    def step(self, tick: int, at: datetime, arrived: int) -> Minute:
        params = self.params
        self.policy.before(at, self.scaler)
        now_s = tick * TICK_S
        self.instances.resize(self.scaler.desired, now_s, self.seed, params)
        serving, share = self.instances.serving(now_s, now_s + TICK_S)  # one ready mid-minute serves the rest
        capacity = share * params.per_instance_per_tick
        waiting = self.queued + arrived
        served = min(waiting, capacity)
        left = waiting - served
        bound = serving * params.capacity_rps_per_instance * params.max_queue_wait_s
        failed = max(0.0, left - bound)
        self.queued = left - failed
        rate = serving * params.capacity_rps_per_instance
        minute = Minute(
            at=at,
            arrived=arrived,
            served=round(served),
            failed=math.ceil(failed - 1e-9),
            queued=self.queued,
            wait_s=self.queued / rate if rate else (math.inf if self.queued else 0.0),
            serving=serving,
            billed=len(self.instances.ready_at),
            desired=self.scaler.desired,
            min_capacity=self.scaler.min_capacity,
        )
        self.minutes.append(minute)
        self.policy.after(minute, self.scaler)
        return minute


def run(trace: Trace, policy: Policy, scaler: Scaler, params: FleetParams, *, seed: int) -> list[Minute]:
    """Play ``trace`` against ``policy``; the instances ``scaler.desired`` names at the start are already serving."""
    variant = Variant(policy, scaler, params, seed=seed)
    for tick, arrived in enumerate(trace.requests):
        variant.step(tick, trace.time(tick), arrived)
    return variant.minutes
