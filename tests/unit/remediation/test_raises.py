"""Raise records: which alarms hold a MinCapacity raise up, and when the pre-scale reconciler may release it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from fleetops.remediation.models import Playbook
from fleetops.remediation.raises import RaiseRecord, alarmed, cleared, raised, release_due, release_reason

AT = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
QUEUE = "manga-llm-fleet-prod-remediation-queue-depth-manga-chat-prod-primary"
SATURATION = "manga-llm-fleet-prod-remediation-saturation-manga-chat-prod-primary"
HOLD = timedelta(seconds=900)


def _raised(record: RaiseRecord | None, alarm_name: str, min_capacity: int, at: datetime) -> RaiseRecord:
    return raised(
        record,
        endpoint_name="manga-chat-prod",
        variant_name="primary",
        alarm_name=alarm_name,
        min_capacity=min_capacity,
        at=at,
    )


def test_two_alarms_clear_the_raise_only_when_both_are_ok() -> None:
    record = _raised(None, QUEUE, 8, AT)
    record = _raised(record, SATURATION, 10, AT + timedelta(minutes=6))
    assert (record.min_capacity, record.raised_at, record.in_alarm) == (
        10,
        AT + timedelta(minutes=6),
        frozenset({QUEUE, SATURATION}),
    )

    one_ok = cleared(record, QUEUE, AT + timedelta(minutes=10))
    assert one_ok is not None and one_ok.in_alarm == {SATURATION} and one_ok.cleared_at is None

    both_ok = cleared(one_ok, SATURATION, AT + timedelta(minutes=12))
    assert both_ok is not None and both_ok.in_alarm == frozenset()
    assert both_ok.cleared_at == AT + timedelta(minutes=12)
    assert both_ok.alarm_names == {QUEUE, SATURATION}  # still named in the release's audit record


def test_a_new_alarm_resets_the_clear_whether_or_not_it_raised_again() -> None:
    ok = cleared(_raised(None, QUEUE, 8, AT), QUEUE, AT + timedelta(minutes=10))
    assert ok is not None and ok.cleared_at is not None

    held = alarmed(ok, QUEUE)  # ALARM again, but the scale-out was skipped (cooldown, cap, not above MinCapacity)
    assert held is not None and held.cleared_at is None and held.in_alarm == {QUEUE}
    assert held.min_capacity == 8

    other = alarmed(ok, SATURATION)  # pressure from another scale-out alarm of the variant holds it too
    assert other is not None and other.cleared_at is None and other.in_alarm == {SATURATION}

    again = _raised(ok, QUEUE, 10, AT + timedelta(minutes=12))
    assert again.cleared_at is None and again.min_capacity == 10


def test_without_a_standing_raise_alarms_and_clears_record_nothing() -> None:
    assert alarmed(None, QUEUE) is None
    assert cleared(None, QUEUE, AT) is None
    record = _raised(None, QUEUE, 8, AT)
    assert cleared(record, SATURATION, AT + timedelta(minutes=1)) == record  # an alarm it never waited for


def test_an_ok_repeated_keeps_the_first_clear_time() -> None:
    ok = cleared(_raised(None, QUEUE, 8, AT), QUEUE, AT + timedelta(minutes=10))
    assert cleared(ok, QUEUE, AT + timedelta(minutes=20)) == ok


@pytest.mark.parametrize(("after_clear", "due"), [(HOLD - timedelta(seconds=1), False), (HOLD, True)])
def test_release_is_due_once_every_alarm_has_been_ok_for_the_hold(after_clear: timedelta, due: bool) -> None:
    cleared_at = AT + timedelta(minutes=10)
    record = cleared(_raised(None, QUEUE, 8, AT), QUEUE, cleared_at)
    assert record is not None
    assert release_due(record, cleared_at + after_clear, HOLD) is due


def test_a_raise_still_in_alarm_is_never_due() -> None:
    record = _raised(None, QUEUE, 8, AT)
    assert not release_due(record, AT + timedelta(days=3), HOLD)


def test_the_release_reason_names_the_raise_its_alarms_and_the_plan_level() -> None:
    record = cleared(_raised(None, QUEUE, 8, AT), QUEUE, AT + timedelta(minutes=10))
    assert record is not None
    reason = release_reason(record, AT + timedelta(minutes=25), 2)
    assert reason == (
        f"alarm responder's raise to MinCapacity 8 (at 2026-11-21T19:02:00+00:00, by {QUEUE}) released to the "
        "plan's 2: its alarms have been OK for 900s"
    )


def test_a_record_cannot_be_cleared_while_an_alarm_holds_it() -> None:
    with pytest.raises(ValidationError, match="cleared_at is set exactly when no alarm is in ALARM"):
        RaiseRecord(
            endpoint_name="e",
            variant_name="primary",
            min_capacity=8,
            raised_at=AT,
            alarm_names=frozenset({QUEUE}),
            in_alarm=frozenset({QUEUE}),
            cleared_at=AT,
        )


def test_the_shipped_hold_is_fifteen_minutes(playbook: Playbook) -> None:
    assert playbook.rails.raise_hold_seconds == 900
    assert playbook.rails.raise_hold == HOLD
