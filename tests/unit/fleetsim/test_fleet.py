"""The fleet model on cases small enough to compute by hand, and the oracle's promise."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from fleetops.config import VariantConfig
from fleetsim.fleet import FleetParams, Minute, Scaler, run
from fleetsim.simulate import load_setup, oracle, simulate
from fleetsim.traffic import Trace, generate

T0 = datetime(2026, 12, 4, 11, 0, tzinfo=UTC)
#: One request per second per instance, instances arrive exactly 5 minutes after launch, queue holds 60 s.
ONE_RPS = FleetParams(capacity_rps_per_instance=1.0, provisioning_s=(300, 300), container_ready_s=0)


@dataclass
class Static:
    """Leaves the desired count where it is."""

    name: str = "static"

    def before(self, at: datetime, scaler: Scaler) -> None:
        pass

    def after(self, minute: Minute, scaler: Scaler) -> None:
        pass


@dataclass
class DesiredAt:
    """A scripted policy: at minute ``tick`` set the desired count."""

    tick: int
    desired: int
    name: str = "scripted"

    def before(self, at: datetime, scaler: Scaler) -> None:
        if at == T0 + timedelta(minutes=self.tick):
            scaler.set_desired(self.desired)

    def after(self, minute: Minute, scaler: Scaler) -> None:
        pass


def test_a_traffic_step_fails_what_the_queue_cannot_hold_until_capacity_arrives() -> None:
    # 60/min for 2 minutes, then 180/min. One instance serves 60/min; at minute 2 the policy asks for 4,
    # which serve from minute 7. Minute 2: 180 arrive, 60 served, 60 wait (the 60 s bound), 60 fail.
    # Minutes 3-6: 60 + 180 wait, 60 served, 60 still wait, 120 fail. Minute 7: 240 capacity drains all.
    trace = Trace(T0, (60, 60, *[180] * 10))
    minutes = run(trace, DesiredAt(tick=2, desired=4), Scaler(1, 10, 1), ONE_RPS, seed=1)
    assert [m.failed for m in minutes] == [0, 0, 60, 120, 120, 120, 120, 0, 0, 0, 0, 0]
    assert sum(m.failed for m in minutes) == 540
    assert [m.serving for m in minutes] == [1] * 7 + [4] * 5
    assert minutes[6].wait_s == 60 and minutes[7].wait_s == 0
    # Billing starts at launch: 4 instances from minute 2, provisioning ones included.
    assert [m.billed for m in minutes] == [1, 1] + [4] * 10


def test_an_instance_ready_within_a_minute_serves_its_share_of_it() -> None:
    params = FleetParams(capacity_rps_per_instance=1.0, provisioning_s=(330, 330), container_ready_s=0)
    trace = Trace(T0, (0, 0, 0, 0, 0, 120, 0))
    minutes = run(trace, DesiredAt(tick=0, desired=2), Scaler(1, 10, 1), params, seed=1)
    # Launched at 0 s, ready at 330 s: in minute 5 [300 s, 360 s) it serves 30 s, so 60 + 30 of 120 are served.
    assert (minutes[5].served, minutes[5].failed, minutes[5].queued) == (90, 0, 30)
    assert minutes[5].wait_s == pytest.approx(15)  # 30 waiting, 2 instances at 1 request/s
    assert (minutes[6].served, minutes[6].queued) == (30, 0)


def test_scaler_clamps_as_application_auto_scaling_does() -> None:
    scaler = Scaler(min_capacity=2, max_capacity=8, desired=3)
    scaler.set_range(5, 8)
    assert scaler.desired == 5  # raising MinCapacity raises the desired count at once
    scaler.set_range(2, 8)
    assert scaler.desired == 5  # lowering it leaves the instances to the autoscaler
    scaler.set_desired(20)
    assert scaler.desired == 8
    scaler.set_range(2, 4)
    assert scaler.desired == 4


def test_scale_in_removes_instances_still_provisioning_before_serving_ones() -> None:
    trace = Trace(T0, (60,) * 4)

    @dataclass
    class UpThenDown:
        name: str = "up-then-down"

        def before(self, at: datetime, scaler: Scaler) -> None:
            scaler.set_desired({0: 3, 1: 2}.get(int((at - T0).total_seconds() // 60), scaler.desired))

        def after(self, minute: Minute, scaler: Scaler) -> None:
            pass

    minutes = run(trace, UpThenDown(), Scaler(1, 10, 2), ONE_RPS, seed=1)
    assert [(m.serving, m.billed) for m in minutes] == [(2, 3), (2, 2), (2, 2), (2, 2)]


@dataclass
class Clairvoyant:
    """Asks for each minute's need as soon as the slowest instance could still make it: serves every minute."""

    start: datetime
    need: list[int]
    lookahead: int
    name: str = "clairvoyant"

    def before(self, at: datetime, scaler: Scaler) -> None:
        tick = int((at - self.start).total_seconds() // 60)
        scaler.set_desired(max(self.need[tick : tick + self.lookahead + 1]))

    def after(self, minute: Minute, scaler: Scaler) -> None:
        pass


@dataclass
class Replay:
    """Sets the desired count each minute to a recorded run's (the oracle's billed instances)."""

    start: datetime
    desired: list[int]
    name: str = "replay"

    def before(self, at: datetime, scaler: Scaler) -> None:
        scaler.set_desired(self.desired[int((at - self.start).total_seconds() // 60)])

    def after(self, minute: Minute, scaler: Scaler) -> None:
        pass


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_oracle_fails_nothing_and_no_policy_that_serves_every_minute_is_billed_less(seed: int) -> None:
    setup = load_setup("manga-chat-prod")
    entries, _ = setup.calendar()
    start = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)
    trace = generate(setup.variant, entries, setup.endpoint.name, start, start + timedelta(hours=18), seed=seed)
    best = oracle(trace, setup)
    # The oracle's capacity played through the fleet model, every instance arriving as fast as it can: its
    # launches come early enough and it removes none too soon, so nothing queues and nothing fails.
    fastest = replace(setup.params, provisioning_s=(setup.params.provisioning_s[0],) * 2)
    billed = [m.billed for m in best]
    replayed = run(trace, Replay(trace.start, billed), Scaler(1, 50, billed[0]), fastest, seed=seed)
    assert [m.failed for m in replayed] == [0] * len(best)
    assert max(m.queued for m in replayed) == 0
    assert [m.billed for m in replayed] == [m.billed for m in best]
    assert [m.serving for m in replayed] >= [m.serving for m in best]
    need = [m.serving for m in best]
    slowest = math.ceil((setup.params.provisioning_s[1] + setup.params.container_ready_s) / 60)
    for policy, desired in ((Static(), setup.variant.cap), (Clairvoyant(trace.start, need, slowest), max(need))):
        minutes = run(trace, policy, Scaler(setup.variant.floor, 50, desired), setup.params, seed=seed)
        assert all(m.failed == 0 and m.queued == 0 for m in minutes), policy.name
        assert sum(m.billed for m in minutes) >= sum(m.billed for m in best), policy.name


def test_policies_see_the_same_trace_and_start_from_the_baseline_capacity() -> None:
    setup = load_setup("manga-chat-prod")
    trace = Trace(T0, (720,) * 30)  # the baseline: 12 requests/s
    runs = simulate(trace, setup, seed=3)
    assert set(runs) == {"reactive", "project", "oracle"}
    assert all(len(minutes) == 30 for minutes in runs.values())
    baseline = VariantConfig.model_validate(setup.variant.model_dump())
    assert runs["reactive"][0].serving == math.ceil(12 * baseline.headroom / baseline.capacity_rps_per_instance)
