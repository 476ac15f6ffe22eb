"""The pure decision core: playbook + alarm + rails -> action plans, with a reason for every one."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetops.capacity import ScalableTarget
from fleetops.remediation.decide import Gate, RailState, decide
from fleetops.remediation.models import Playbook
from tests.unit.remediation.conftest import CANARY, PRIMARY, parsed

TARGET = ScalableTarget(min_capacity=2, max_capacity=12)


def _statuses(decision: object) -> list[tuple[str, str]]:
    return [(p.action.value, p.status) for p in decision.plans]  # type: ignore[attr-defined]


def test_queue_alarm_scales_out_and_notifies(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    d = decide(alarm, PRIMARY, playbook=playbook, target=TARGET, rails=RailState(), gate=Gate())
    assert _statuses(d) == [("scale_out", "go"), ("notify", "go")]
    scale = d.plans[0]
    assert scale.after == {"min_capacity": 6, "max_capacity": 12}
    assert scale.reason == "breach x3.60 of the threshold -> step +4: MinCapacity 2 -> 6"


def test_min_above_max_raises_max_too_but_never_lowers_anything(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    d = decide(
        alarm,
        PRIMARY,
        playbook=playbook,
        target=ScalableTarget(min_capacity=2, max_capacity=4),
        rails=RailState(),
        gate=Gate(),
    )
    assert d.plans[0].after == {"min_capacity": 6, "max_capacity": 6}
    d = decide(
        alarm,
        PRIMARY,
        playbook=playbook,
        target=ScalableTarget(min_capacity=2, max_capacity=20),
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
    d = decide(alarm, PRIMARY, playbook=playbook, target=TARGET, rails=rails, gate=Gate())
    assert d.plans[0].status == status


def test_rate_limit_counts_the_rolling_hour(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    six = tuple(alarm.at - timedelta(minutes=m) for m in (10, 15, 20, 25, 30, 59))
    d = decide(alarm, PRIMARY, playbook=playbook, target=TARGET, rails=RailState(recent_actions=six), gate=Gate())
    assert d.plans[0].status == "skipped"
    assert d.plans[0].reason == "rate limit: 6 fleet changes in the last hour, at most 6"
    older = (*six[:-1], alarm.at - timedelta(minutes=61))
    d = decide(alarm, PRIMARY, playbook=playbook, target=TARGET, rails=RailState(recent_actions=older), gate=Gate())
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
    d = decide(parsed(playbook, name), CANARY, playbook=playbook, target=None, rails=RailState(), gate=Gate())
    assert _statuses(d) == [("rollback", "go"), ("notify", "go")]


@pytest.mark.parametrize(
    "name", ["alarm_oom_primary_alarm", "alarm_engine_restarts_primary_alarm", "alarm_kv_cache_primary_alarm"]
)
def test_primary_trouble_without_a_capacity_answer_only_notifies(playbook: Playbook, name: str) -> None:
    d = decide(parsed(playbook, name), PRIMARY, playbook=playbook, target=TARGET, rails=RailState(), gate=Gate())
    assert _statuses(d) == [("notify", "go")]


def test_rollback_is_rate_limited_and_gated(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_oom_canary_alarm")
    full = RailState(recent_actions=tuple(alarm.at - timedelta(minutes=m) for m in range(1, 7)))
    assert decide(alarm, CANARY, playbook=playbook, target=None, rails=full, gate=Gate()).plans[0].status == "skipped"
    gated = decide(alarm, CANARY, playbook=playbook, target=None, rails=RailState(), gate=Gate(kill_switch=True))
    assert gated.plans[0].status == "planned" and gated.plans[0].reason.startswith("kill switch engaged: would")


def test_ok_records_recovery_and_changes_nothing(playbook: Playbook) -> None:
    d = decide(
        parsed(playbook, "alarm_queue_depth_ok"),
        PRIMARY,
        playbook=playbook,
        target=TARGET,
        rails=RailState(),
        gate=Gate(),
    )
    assert _statuses(d) == [("record_recovery", "go")]
    assert d.plans[0].reason.startswith("recovered (was ALARM): Threshold Crossed")


def test_insufficient_data_does_nothing(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm").model_copy(update={"state": "INSUFFICIENT_DATA"})
    assert decide(alarm, PRIMARY, playbook=playbook, target=TARGET, rails=RailState(), gate=Gate()).plans == ()
