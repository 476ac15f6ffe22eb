"""A canary rollout on the simulated endpoint, beside the primary's own policy.

At each step the canary variant is sized by the rollout's real code (:func:`fleetops.rollout.canary_capacity.
canary_size`, from what both variants serve when the step starts) and runs the template's target tracking from
that floor; users move to it at the step's weight once its instances serve, and the step bakes from then. A
step whose canary would need more than ``canary_limits`` allows is not taken: the rollout stops there and its
users go back to the primary (the workflow refuses the step the same way). The last step (100) promotes: the
primary's instances take the new model and the canary goes.

Left out: the endpoint update's own minutes (SageMaker's blue/green replacement bills the new instances beside
the old ones while it runs), analysis verdicts (every step passes), approval waits beyond the bake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fleetops.rollout.canary_capacity import canary_size
from fleetops.rollout.request_schema import DEFAULT_STEPS
from fleetsim.fleet import FleetParams, Minute, Policy, Scaler, Variant
from fleetsim.stack import TargetTrackingSpec
from fleetsim.tracking import TargetTracking
from fleetsim.traffic import Trace


@dataclass(frozen=True)
class Rollout:
    start: datetime
    max_canary: int  # fleet.yaml canary_limits.max_instance_count
    floor: int  # the primary's floor
    steps: tuple[float, ...] = DEFAULT_STEPS
    bake: timedelta = timedelta(minutes=10)  # prod's min_bake_seconds


@dataclass
class RolloutRun:
    primary: list[Minute]
    canary: list[Minute]
    weights: list[float] = field(default_factory=list)  # the canary's share of users, per minute
    stopped_at_step: float | None = None  # a step the canary limit refused
    promoted_at: datetime | None = None


def run_rollout(
    trace: Trace,
    policy: Policy,
    scaler: Scaler,
    params: FleetParams,
    *,
    seed: int,
    rollout: Rollout,
    tracking: Sequence[TargetTrackingSpec],
) -> RolloutRun:
    primary = Variant(policy, scaler, params, seed=seed)
    canary = Variant(
        TargetTracking(*tracking, name="canary", request_seconds=params.request_seconds),
        Scaler(0, rollout.max_canary, 0),
        params,
        seed=seed + 1,
    )
    run = RolloutRun(primary.minutes, canary.minutes)
    step, weight, baked_from = -1, 0.0, None
    need = 0  # instances the step waits for: the canary's (a canary step) or the primary's (the promotion)
    plan_min = scaler.min_capacity
    for tick, arrived in enumerate(trace.requests):
        at = trace.time(tick)
        active = run.promoted_at is None and run.stopped_at_step is None
        due = (step == -1 and at >= rollout.start) or (baked_from is not None and at - baked_from >= rollout.bake)
        if active and due:
            step, baked_from = step + 1, None
            serving = primary.serving + canary.serving  # what served users before this step
            if rollout.steps[step] >= 100:
                # The primary's instances take the new model: first they grow back to what served users.
                need, plan_min = min(serving, primary.scaler.max_capacity), primary.scaler.min_capacity
                primary.scaler.set_range(max(plan_min, need), primary.scaler.max_capacity)
            else:
                size = canary_size(serving=serving, weight=rollout.steps[step], floor=rollout.floor, max_canary=10**6)
                if size.canary > rollout.max_canary:  # refused: users go back to the primary, the canary goes
                    run.stopped_at_step, weight, active = rollout.steps[step], 0.0, False
                    canary.scaler.set_range(0, 0)
                else:
                    need = size.canary
                    canary.scaler.set_range(need, rollout.max_canary)
        if active and step >= 0 and baked_from is None:
            if rollout.steps[step] >= 100 and primary.serving >= need:
                run.promoted_at, weight = at, 0.0
                canary.scaler.set_range(0, 0)
                if primary.scaler.min_capacity == max(plan_min, need):  # nobody moved it meanwhile: the plan's again
                    primary.scaler.min_capacity = plan_min
            elif rollout.steps[step] < 100 and canary.serving >= need:  # the update is done: users move, bake
                weight, baked_from = rollout.steps[step], at
        to_canary = round(arrived * weight / 100)
        run.weights.append(weight)
        primary.step(tick, at, arrived - to_canary)
        canary.step(tick, at, to_canary)
    return run


def together(primary: Sequence[Minute], canary: Sequence[Minute]) -> list[Minute]:
    """The endpoint's minutes: both variants' requests, instances and bills added up."""
    return [
        Minute(
            at=p.at,
            arrived=p.arrived + c.arrived,
            served=p.served + c.served,
            failed=p.failed + c.failed,
            queued=p.queued + c.queued,
            wait_s=max(p.wait_s, c.wait_s),
            serving=p.serving + c.serving,
            billed=p.billed + c.billed,
            desired=p.desired + c.desired,
            min_capacity=p.min_capacity + c.min_capacity,
        )
        for p, c in zip(primary, canary, strict=True)
    ]


def overloaded_minutes(run: RolloutRun, degraded_wait_s: float) -> int:
    """Minutes in which the canary, taking users, failed one or made one wait longer than ``degraded_wait_s``."""
    return sum(
        1 for m, w in zip(run.canary, run.weights, strict=True) if w > 0 and (m.failed or m.wait_s > degraded_wait_s)
    )
