"""The pure decision core: playbook + alarm + rails -> action plans, with a reason for every one."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetops.capacity import ScalableTarget
from fleetops.remediation.decide import ActionPlan, Gate, decide, plan_scale_out
from fleetops.remediation.models import Playbook
from fleetops.remediation.rails import RailState
from tests.unit.remediation.conftest import CANARY, PRIMARY, parsed

TARGET = ScalableTarget(min_capacity=2, max_capacity=12)


def _statuses(decision: object) -> list[tuple[str, str]]:
    return [(p.action.value, p.status) for p in decision.plans]  # type: ignore[attr-defined]


def test_queue_alarm_scales_out_and_notifies(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    d = decide(alarm, PRIMARY, playbook=playbook, target=TARGET, serving=2, rails=RailState(), gate=Gate())
    assert _statuses(d) == [("scale_out", "go"), ("notify", "go")]
    scale = d.plans[0]
    assert scale.after == {"min_capacity": 6, "max_capacity": 12}
    assert scale.reason == "breach x3.60 of the threshold -> step +4 from 2 serving: MinCapacity 2 -> 6"


def test_min_above_max_raises_max_too_but_never_lowers_anything(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    d = decide(
        alarm,
        PRIMARY,
        playbook=playbook,
        target=ScalableTarget(min_capacity=2, max_capacity=4),
        serving=2,
        rails=RailState(),
        gate=Gate(),
    )
    assert d.plans[0].after == {"min_capacity": 6, "max_capacity": 6}
    d = decide(
        alarm,
        PRIMARY,
        playbook=playbook,
        target=ScalableTarget(min_capacity=2, max_capacity=20),
        serving=2,
        rails=RailState(),
        gate=Gate(),
    )
    assert d.plans[0].after == {"min_capacity": 6, "max_capacity": 20}


def test_below_floor_is_lifted_to_at_least_the_floor(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    d = decide(
        alarm,
        PRIMARY,
        playbook=playbook,
        target=ScalableTarget(min_capacity=0, max_capacity=12),
        serving=None,
        rails=RailState(),
        gate=Gate(),
    )
    assert d.plans[0].after == {"min_capacity": 4, "max_capacity": 12}


def test_clamped_at_cap(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    d = decide(
        alarm,
        PRIMARY,
        playbook=playbook,
        target=ScalableTarget(min_capacity=11, max_capacity=12),
        serving=11,
        rails=RailState(),
        gate=Gate(),
    )
    assert d.plans[0].after == {"min_capacity": 12, "max_capacity": 12}
    assert d.plans[0].reason.endswith("clamped to cap 12")


def test_no_scalable_target(playbook: Playbook) -> None:
    d = decide(
        parsed(playbook, "alarm_queue_depth_alarm"),
        PRIMARY,
        playbook=playbook,
        target=None,
        serving=None,
        rails=RailState(),
        gate=Gate(),
    )
    assert _statuses(d)[0] == ("scale_out", "skipped")
    assert "no scalable target registered" in d.plans[0].reason


@pytest.mark.parametrize(("ago_s", "status"), [(0, "skipped"), (299, "skipped"), (300, "go"), (3600, "go")])
def test_cooldown(playbook: Playbook, ago_s: int, status: str) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    rails = RailState(
        last_scale_out_at=alarm.at - timedelta(seconds=ago_s), recent_actions=(alarm.at - timedelta(seconds=ago_s),)
    )
    d = decide(alarm, PRIMARY, playbook=playbook, target=TARGET, serving=2, rails=rails, gate=Gate())
    assert d.plans[0].status == status


def test_rate_limit_counts_the_rolling_hour(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    six = tuple(alarm.at - timedelta(minutes=m) for m in (10, 15, 20, 25, 30, 59))
    d = decide(
        alarm, PRIMARY, playbook=playbook, target=TARGET, serving=2, rails=RailState(recent_actions=six), gate=Gate()
    )
    assert d.plans[0].status == "skipped"
    assert d.plans[0].reason == "rate limit: 6 fleet changes in the last hour, at most 6"
    older = (*six[:-1], alarm.at - timedelta(minutes=61))
    d = decide(
        alarm, PRIMARY, playbook=playbook, target=TARGET, serving=2, rails=RailState(recent_actions=older), gate=Gate()
    )
    assert d.plans[0].status == "go"


@pytest.mark.parametrize(
    ("gate", "why"),
    [
        (Gate(dry_run=True), "dry run"),
        (Gate(kill_switch=True), "kill switch engaged"),
        (Gate(dry_run=True, kill_switch=True), "kill switch engaged"),
    ],
)
def test_gate_plans_without_changing(playbook: Playbook, gate: Gate, why: str) -> None:
    d = decide(
        parsed(playbook, "alarm_queue_depth_alarm"),
        PRIMARY,
        playbook=playbook,
        target=TARGET,
        serving=2,
        rails=RailState(),
        gate=gate,
    )
    assert _statuses(d) == [("scale_out", "planned"), ("notify", "go")]
    assert d.plans[0].reason.startswith(f"{why}: would breach")
    assert d.plans[0].after == {"min_capacity": 6, "max_capacity": 12}


@pytest.mark.parametrize(
    "name",
    [
        "alarm_oom_canary_alarm",
        "alarm_breaker_trips_canary_alarm",
        "alarm_ttft_p95_canary_alarm",
        "alarm_error_rate_canary_alarm",
    ],
)
def test_canary_in_trouble_rolls_back_and_notifies(playbook: Playbook, name: str) -> None:
    d = decide(
        parsed(playbook, name), CANARY, playbook=playbook, target=None, serving=None, rails=RailState(), gate=Gate()
    )
    assert _statuses(d) == [("rollback", "go"), ("notify", "go")]


@pytest.mark.parametrize(
    "name", ["alarm_oom_primary_alarm", "alarm_engine_restarts_primary_alarm", "alarm_kv_cache_primary_alarm"]
)
def test_primary_trouble_without_a_capacity_answer_only_notifies(playbook: Playbook, name: str) -> None:
    d = decide(
        parsed(playbook, name), PRIMARY, playbook=playbook, target=TARGET, serving=2, rails=RailState(), gate=Gate()
    )
    assert _statuses(d) == [("notify", "go")]


def test_a_rollback_is_a_retreat_that_neither_the_rate_limit_nor_the_kill_switch_holds(playbook: Playbook) -> None:
    """During a load incident the hour's six changes went to scale-outs and the operator pulled the kill switch:
    the broken canary's rollback still goes ahead, and the audit says what it went ahead despite."""
    alarm = parsed(playbook, "alarm_oom_canary_alarm")
    full = RailState(recent_actions=tuple(alarm.at - timedelta(minutes=m) for m in range(1, 7)))

    both = decide(alarm, CANARY, playbook=playbook, target=None, serving=None, rails=full, gate=Gate(kill_switch=True))

    assert both.plans[0].status == "go", both.plans[0]
    assert "goes ahead despite: kill switch engaged; rate limit: 6 fleet changes" in both.plans[0].reason
    dry = decide(alarm, CANARY, playbook=playbook, target=None, serving=None, rails=full, gate=Gate(dry_run=True))
    assert dry.plans[0].status == "planned" and dry.plans[0].reason.startswith("dry run: would")


def test_ok_records_recovery_and_changes_nothing(playbook: Playbook) -> None:
    d = decide(
        parsed(playbook, "alarm_queue_depth_ok"),
        PRIMARY,
        playbook=playbook,
        target=TARGET,
        serving=2,
        rails=RailState(),
        gate=Gate(),
    )
    assert _statuses(d) == [("record_recovery", "go")]
    assert d.plans[0].reason.startswith("recovered (was ALARM): Threshold Crossed")


def test_insufficient_data_does_nothing(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm").model_copy(update={"state": "INSUFFICIENT_DATA"})
    assert (
        decide(alarm, PRIMARY, playbook=playbook, target=TARGET, serving=2, rails=RailState(), gate=Gate()).plans == ()
    )


# --- the step counts from the instances serving, not from MinCapacity ---


def _scale_out(playbook: Playbook, *, observed: float, min_capacity: int, serving: int | None) -> ActionPlan:
    alarm = parsed(playbook, "alarm_queue_depth_alarm").model_copy(update={"observed": observed})
    target = ScalableTarget(min_capacity=min_capacity, max_capacity=12)
    return plan_scale_out(
        alarm, PRIMARY, playbook=playbook, target=target, serving=serving, rails=RailState(), gate=Gate()
    )


def test_the_step_counts_from_the_instances_target_tracking_already_runs(playbook: Playbook) -> None:
    # Target tracking took the fleet to 6 while MinCapacity stayed 2: +2 must mean 8 instances, not MinCapacity 4.
    plan = _scale_out(playbook, observed=60.0, min_capacity=2, serving=6)
    assert plan.status == "go"
    assert plan.after == {"min_capacity": 8, "max_capacity": 12}
    assert plan.reason == "breach x1.20 of the threshold -> step +2 from 6 serving: MinCapacity 2 -> 8"


def test_an_unknown_serving_count_steps_from_min_capacity_and_says_so(playbook: Playbook) -> None:
    plan = _scale_out(playbook, observed=60.0, min_capacity=3, serving=None)
    assert plan.after == {"min_capacity": 5, "max_capacity": 12}
    assert plan.reason == (
        "breach x1.20 of the threshold -> step +2 from MinCapacity 3 (serving count unavailable): MinCapacity 3 -> 5"
    )


@pytest.mark.parametrize(("min_capacity", "serving"), [(8, 6), (9, 6)])
def test_a_step_not_above_min_capacity_changes_nothing(playbook: Playbook, min_capacity: int, serving: int) -> None:
    # A raise to 8 is still arriving (6 serving): another +2 from 6 would not raise MinCapacity, nor lower it.
    plan = _scale_out(playbook, observed=60.0, min_capacity=min_capacity, serving=serving)
    assert plan.status == "skipped" and plan.after is None
    assert plan.reason == (
        f"breach x1.20 of the threshold -> step +2 from 6 serving: 8 is not above MinCapacity {min_capacity}, "
        "nothing to raise"
    )


def test_the_step_from_the_serving_count_is_clamped_at_the_cap(playbook: Playbook) -> None:
    plan = _scale_out(playbook, observed=400.0, min_capacity=2, serving=7)  # +8 from 7 = 15
    assert plan.after == {"min_capacity": 12, "max_capacity": 12}
    assert plan.reason.endswith("from 7 serving: MinCapacity 2 -> 12, clamped to cap 12")


def test_decide_passes_the_serving_count_to_the_scale_out(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")  # x3.6: +4
    d = decide(alarm, PRIMARY, playbook=playbook, target=TARGET, serving=5, rails=RailState(), gate=Gate())
    assert d.plans[0].after == {"min_capacity": 9, "max_capacity": 12}
