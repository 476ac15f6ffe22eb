"""The simulated policies act through the project's own code: the template's numbers, the reconciler, decide()."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetops.remediation.models import load_playbook
from fleetsim import stack
from fleetsim.fleet import FleetParams, Minute, Scaler, run
from fleetsim.policies import AlarmResponse, CalendarPrescale, TargetTracking
from fleetsim.simulate import PLAYBOOK, load_setup
from fleetsim.traffic import Trace

T0 = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)
PARAMS = FleetParams(capacity_rps_per_instance=4.0, provisioning_s=(300, 300), container_ready_s=60)


def _minute(arrived: int, serving: int, queued: float = 0.0, tick: int = 0) -> Minute:
    return Minute(T0 + timedelta(minutes=tick), arrived, arrived, 0, queued, 0.0, serving, serving, serving, 2)


def test_the_stack_declares_target_tracking_and_the_reconciler_schedule_the_simulator_reads() -> None:
    spec = stack.target_tracking("manga-chat-prod", "primary")
    assert spec == stack.TargetTrackingSpec(200.0, 60, 600)
    assert stack.prescale_interval_s() == 15 * 60


def test_target_tracking_scales_out_after_three_minutes_above_the_target() -> None:
    tracking = TargetTracking(stack.TargetTrackingSpec(200.0, 60, 600))
    scaler = Scaler(2, 12, 4)
    for tick in range(3):
        assert scaler.desired == 4
        tracking.after(_minute(1000, 4, tick=tick), scaler)  # 250 per instance
    assert scaler.desired == 5  # ceil(1000 / 200)


def test_target_tracking_scales_in_after_fifteen_minutes_below_ninety_percent_then_waits_its_cooldown() -> None:
    tracking = TargetTracking(stack.TargetTrackingSpec(200.0, 60, 600))
    scaler = Scaler(2, 12, 8)
    for tick in range(14):
        tracking.after(_minute(600, 8, tick=tick), scaler)
    assert scaler.desired == 8
    tracking.after(_minute(600, 8, tick=14), scaler)
    assert scaler.desired == 3  # ceil(600 / 200)
    for tick in range(15, 15 + 9):
        tracking.after(_minute(200, 3, tick=tick), scaler)
    assert scaler.desired == 3  # scale-in cooldown 600 s
    tracking.after(_minute(200, 3, tick=24), scaler)
    assert scaler.desired == 2  # ceil(200 / 200) = 1, held at MinCapacity


def test_the_real_reconciler_raises_capacity_lead_time_before_a_one_off_release() -> None:
    setup = load_setup("manga-chat-prod")
    release = {
        "name": "One Piece ch. 1100",
        "start": "2026-12-03T20:00",
        "timezone": "Asia/Tokyo",
        "duration_minutes": 180,
        "multiplier": 3,
    }  # a Thursday: no recurring event that evening
    prescale = CalendarPrescale(setup.config, setup.endpoint, [release], setup.prescale_interval_s)
    trace = Trace(datetime(2026, 12, 3, 9, 0, tzinfo=UTC), (720,) * 240)  # 18:00-22:00 JST
    minutes = {m.at: m for m in run(trace, prescale, Scaler(2, 12, 4), PARAMS, seed=1)}
    raised = datetime(2026, 12, 3, 11, 0, tzinfo=UTC) - timedelta(minutes=setup.config.prescale.lead_time_minutes)
    assert minutes[trace.start].min_capacity == 4  # the first run raises MinCapacity to the baseline's 4 at once
    assert minutes[raised - timedelta(minutes=1)].min_capacity == 4
    assert minutes[raised].min_capacity == 12  # ceil(12 requests/s x3 x headroom 1.25 / 4) = 12, the cap
    assert minutes[raised].desired == 12


def test_the_responders_decide_raises_min_capacity_on_a_queue_alarm_and_its_cooldown_holds_the_next() -> None:
    setup = load_setup("manga-chat-prod")
    responder = AlarmResponse(setup.playbook, setup.endpoint.name, setup.variant)
    scaler = Scaler(4, 12, 4)
    responder.after(_minute(1200, 4, queued=4 * 80, tick=0), scaler)  # 80 waiting per instance: x1.6 of 50
    assert (scaler.min_capacity, scaler.desired) == (6, 6)  # step +2 on MinCapacity
    responder.after(_minute(1200, 6, queued=0, tick=1), scaler)  # OK again
    responder.after(_minute(1200, 6, queued=6 * 300, tick=2), scaler)  # x6: +8, but within the 300 s cooldown
    assert scaler.min_capacity == 6
    assert any("cooldown" in reason for _, _, reason in responder.decisions)


def test_the_responder_follows_the_playbook_file(tmp_path: Path) -> None:
    setup = load_setup("manga-chat-prod")
    edited = tmp_path / "playbook.yaml"
    edited.write_text(PLAYBOOK.read_text().replace("threshold: 50", "threshold: 500", 1))
    responder = AlarmResponse(load_playbook(edited), setup.endpoint.name, setup.variant)
    scaler = Scaler(4, 12, 4)
    responder.after(_minute(1200, 4, queued=4 * 80), scaler)
    assert scaler.min_capacity == 4  # 80 waiting is no alarm at a threshold of 500


@pytest.mark.parametrize("target", [150.0, 250.0])
def test_the_templates_target_moves_the_reactive_fleet(target: float) -> None:
    setup = load_setup("manga-chat-prod")
    trace = Trace(T0, (1500,) * 30)
    minutes = run(
        trace,
        TargetTracking(replace(setup.tracking, target_per_instance_per_minute=target)),
        Scaler(2, 12, 4),
        PARAMS,
        seed=1,
    )
    assert minutes[-1].serving == -(-1500 // int(target))
