"""A canary rollout in the simulator (fleetsim.rollout): the canary sized by the rollout's own code at each step,
users moved once its instances serve, promotion on the primary's instances, a step the limits refuse stops it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetops.rollout.canary_capacity import canary_size
from fleetsim.fleet import FleetParams, Minute, Scaler
from fleetsim.rollout import Rollout, RolloutRun, overloaded_minutes, run_rollout, together
from fleetsim.stack import CONCURRENT_REQUESTS_PER_MODEL, TargetTrackingSpec
from fleetsim.traffic import Trace

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
PARAMS = FleetParams(capacity_rps_per_instance=1.0, provisioning_s=(300, 300), container_ready_s=0)
TRACKING = (TargetTrackingSpec(CONCURRENT_REQUESTS_PER_MODEL, 36.0, 60, 600),)


class Fixed:
    """A primary policy that changes nothing (the rollout's effect alone)."""

    name = "fixed"

    def before(self, at: datetime, scaler: Scaler) -> None:
        pass

    def after(self, minute: Minute, scaler: Scaler) -> None:
        pass


def _run(max_canary: int, minutes: int = 120) -> tuple[RolloutRun, list[Minute]]:
    trace = Trace(T0, (360,) * minutes)  # 6 rps: the 8 primary instances at 75 %
    rollout = Rollout(start=T0 + timedelta(minutes=5), max_canary=max_canary, floor=2, bake=timedelta(minutes=10))
    run = run_rollout(trace, Fixed(), Scaler(2, 12, 8), PARAMS, seed=1, rollout=rollout, tracking=TRACKING)
    return run, together(run.primary, run.canary)


def test_each_step_moves_users_only_once_the_canary_sized_for_it_serves_and_promotion_brings_them_back() -> None:
    run, both = _run(max_canary=12)

    assert run.promoted_at is not None and run.stopped_at_step is None
    weights = run.weights
    assert [w for i, w in enumerate(weights) if i == 0 or w != weights[i - 1]] == [0.0, 5, 25, 50, 75, 0.0]
    for minute, canary, weight in zip(run.primary, run.canary, weights, strict=True):
        if weight:
            size = canary_size(serving=8, weight=weight, floor=2, max_canary=12)
            assert canary.serving >= size.canary, (minute.at, weight, canary.serving)
    # Nobody waited or failed, and after the promotion the canary bills nothing.
    assert overloaded_minutes(run, PARAMS.degraded_wait_s) == 0
    assert sum(m.failed for m in both) == 0
    assert run.canary[-1].billed == 0


def test_a_step_the_canary_limit_cannot_size_stops_the_rollout_and_users_go_back() -> None:
    run, both = _run(max_canary=2)

    # At 25 % the canary's share of the 9 instances serving (8 + the 5 % step's 1) is 3, over the limit of 2.
    assert run.stopped_at_step == 25 and run.promoted_at is None
    assert run.weights[-1] == 0.0 and run.canary[-1].billed == 0
    assert sum(m.failed for m in both) == 0
