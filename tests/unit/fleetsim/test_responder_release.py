"""The simulated responder keeps the real one's raise records: a raise comes back down to the plan's level once its
alarms have been OK for the playbook's raise_hold_seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetsim.fleet import Minute, Scaler
from fleetsim.policies import AlarmResponse
from fleetsim.simulate import load_setup

T0 = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)


def _minute(serving: int, queued: float, tick: int) -> Minute:
    return Minute(T0 + timedelta(minutes=tick), 1200, 1200, 0, queued, 0.0, serving, serving, serving, 2)


def _spike_then_calm(responder: AlarmResponse, scaler: Scaler, calm_minutes: int) -> None:
    responder.after(_minute(6, queued=6 * 60, tick=0), scaler)  # 60 waiting per instance: x1.2, +2 from 6 serving
    for tick in range(1, 1 + calm_minutes):
        responder.after(_minute(8, queued=0, tick=tick), scaler)  # OK from the minute ending at T0+2m


def test_the_step_counts_from_the_simulated_instances_serving() -> None:
    setup = load_setup("manga-chat-prod")
    scaler = Scaler(2, 12, 6)
    AlarmResponse(setup.playbook, setup.endpoint.name, setup.variant).after(_minute(6, 6 * 60, 0), scaler)
    assert scaler.min_capacity == 8  # 6 serving + 2, not MinCapacity 2 + 2


def test_a_raise_is_released_to_the_plan_level_once_its_alarm_has_been_ok_for_the_hold() -> None:
    setup = load_setup("manga-chat-prod")
    assert setup.playbook.rails.raise_hold_seconds == 900
    responder = AlarmResponse(setup.playbook, setup.endpoint.name, setup.variant, plan_level=lambda: 3)
    scaler = Scaler(2, 12, 6)

    _spike_then_calm(responder, scaler, calm_minutes=15)  # OK since T0+2m; the last minute ends at T0+16m
    assert scaler.min_capacity == 8 and responder.raise_record is not None

    responder.after(_minute(8, queued=0, tick=16), scaler)  # ends at T0+17m: 15 minutes OK
    assert (scaler.min_capacity, scaler.desired) == (3, 8)  # target tracking scales in from here
    assert responder.raise_record is None
    assert responder.decisions[-1][1:] == (
        "release",
        "released raise to MinCapacity 8: alarms OK since 2026-12-04 00:02:00+00:00, back to the plan's 3",
    )


def test_without_a_plan_level_a_raise_stays() -> None:
    setup = load_setup("manga-chat-prod")
    responder = AlarmResponse(setup.playbook, setup.endpoint.name, setup.variant)
    scaler = Scaler(2, 12, 6)
    _spike_then_calm(responder, scaler, calm_minutes=60)
    assert scaler.min_capacity == 8
