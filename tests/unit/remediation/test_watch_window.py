"""The watch window after a promotion: a primary's error, latency, OOM and engine-death alarms roll the promotion
back while it is young, and only notify once it is older than fleet.yaml's window (the arithmetic, no AWS)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetops.config import FleetConfig, RolloutFloors, load_fleet_config
from fleetops.remediation.actions import ActionType
from fleetops.remediation.alarm import ParsedAlarm
from fleetops.remediation.decide import Decision, Gate, decide
from fleetops.remediation.models import Playbook
from fleetops.remediation.rails import RailState
from fleetops.remediation.watch_window import Promotion, WatchWindow
from tests.conftest import REPO
from tests.unit.remediation.conftest import CANARY, PRIMARY, parsed

DAY = 24 * 3600


def promoted(alarm: ParsedAlarm, before: timedelta) -> Promotion:
    """The release v7 promoted ``before`` the alarm fired, replacing v6."""
    return Promotion(
        promoted_at=alarm.at - before,
        version="v7",
        previous_version="v6",
        endpoint_config_name="manga-chat-prod-v7-final",
    )


def on_primary(
    playbook: Playbook, name: str, before: timedelta | None, *, seconds: int = DAY, **gate: bool
) -> Decision:
    alarm = parsed(playbook, name)
    watch = WatchWindow(promotion=promoted(alarm, before) if before is not None else None, seconds=seconds)
    return decide(
        alarm, PRIMARY, playbook=playbook, target=None, serving=None, rails=RailState(), gate=Gate(**gate), watch=watch
    )


def statuses(decision: Decision) -> list[tuple[str, str]]:
    return [(p.action.value, p.status) for p in decision.plans]


@pytest.mark.parametrize(
    "name",
    [
        "alarm_error_rate_primary_alarm",
        "alarm_oom_primary_alarm",
        "alarm_engine_restarts_primary_alarm",
    ],
)
def test_an_alarm_an_hour_after_the_promotion_rolls_it_back_with_the_reason(playbook: Playbook, name: str) -> None:
    decision = on_primary(playbook, name, timedelta(hours=1))

    assert statuses(decision) == [("rollback", "go"), ("notify", "go")]
    kind = decision.alarm.kind
    rollback = decision.plans[0].reason
    assert rollback == f"watch window: v7 promoted 1 h ago, {kind} alarm: roll back to the previous release"
    assert decision.watched == "watch window: v7 promoted 1 h ago"


@pytest.mark.parametrize(
    ("before", "rolls_back"),
    [
        (timedelta(minutes=1), True),
        (timedelta(hours=23, minutes=59), True),
        (timedelta(hours=24), False),  # the window is [promotion, promotion + 24 h)
        (timedelta(hours=25), False),
        (-timedelta(minutes=5), False),  # fired before the promotion: about the release before it
    ],
)
def test_the_window_runs_from_the_promotion_for_the_configured_seconds(
    playbook: Playbook, before: timedelta, rolls_back: bool
) -> None:
    decision = on_primary(playbook, "alarm_error_rate_primary_alarm", before)

    expected = [("rollback", "go"), ("notify", "go")] if rolls_back else [("notify", "go")]
    assert statuses(decision) == expected
    assert (decision.watched is not None) is rolls_back


def test_25_hours_after_the_promotion_the_alarm_notifies_and_says_why_it_did_not_roll_back(playbook: Playbook) -> None:
    decision = on_primary(playbook, "alarm_error_rate_primary_alarm", timedelta(hours=25))

    assert statuses(decision) == [("notify", "go")]
    assert decision.watch_note == "v7 promoted 25 h ago, after its 24 h watch window: no automatic rollback"


def test_a_shorter_window_and_a_window_of_zero_come_from_the_configuration(playbook: Playbook) -> None:
    two_hours = on_primary(playbook, "alarm_error_rate_primary_alarm", timedelta(hours=3), seconds=2 * 3600)
    never = on_primary(playbook, "alarm_error_rate_primary_alarm", timedelta(minutes=1), seconds=0)

    assert statuses(two_hours) == [("notify", "go")]
    assert statuses(never) == [("notify", "go")]


def test_without_a_promotion_to_undo_a_primary_only_notifies(playbook: Playbook) -> None:
    """A pointer a rollback restored names no previous release: nothing to walk back to."""
    decision = on_primary(playbook, "alarm_error_rate_primary_alarm", None)

    assert statuses(decision) == [("notify", "go")]
    assert decision.watched is None and decision.watch_note is None


@pytest.mark.parametrize("name", ["alarm_kv_cache_primary_alarm", "alarm_gpu_unhealthy_primary_alarm"])
def test_kinds_that_do_not_blame_the_release_ignore_the_window(playbook: Playbook, name: str) -> None:
    """KV-cache pressure and a failed GPU are capacity and hardware, not the release: no ``promoted`` actions."""
    decision = on_primary(playbook, name, timedelta(hours=1))

    assert statuses(decision) == [("notify", "go")]
    assert decision.watched is None and decision.watch_note is None


def test_the_window_does_not_change_what_a_queue_alarm_does(playbook: Playbook) -> None:
    decision = on_primary(playbook, "alarm_queue_depth_alarm", timedelta(hours=1))

    assert [p.action for p in decision.plans] == [ActionType.SCALE_OUT, ActionType.NOTIFY]


def test_a_canary_alarm_rolls_back_as_before_whatever_the_window(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_error_rate_canary_alarm")
    watch = WatchWindow(promotion=promoted(alarm, timedelta(hours=30)), seconds=DAY)

    decision = decide(
        alarm, CANARY, playbook=playbook, target=None, serving=None, rails=RailState(), gate=Gate(), watch=watch
    )

    assert statuses(decision) == [("rollback", "go"), ("notify", "go")]
    assert decision.plans[0].reason == "canary 'canary' in trouble (error-rate): roll back"


def test_a_watch_window_rollback_is_a_retreat_and_a_dry_run_only_plans_it(playbook: Playbook) -> None:
    engaged = on_primary(playbook, "alarm_error_rate_primary_alarm", timedelta(hours=2), kill_switch=True)
    dry = on_primary(playbook, "alarm_error_rate_primary_alarm", timedelta(hours=2), dry_run=True)

    assert engaged.plans[0].status == "go"
    assert "goes ahead despite: kill switch engaged" in engaged.plans[0].reason
    assert dry.plans[0].status == "planned"
    assert dry.plans[0].reason.startswith("dry run: would watch window: v7 promoted 2 h ago, error-rate alarm")


def test_the_playbook_rolls_back_only_the_error_latency_oom_and_engine_death_kinds(playbook: Playbook) -> None:
    watched = {kind for kind, spec in playbook.alarms.items() if ActionType.ROLLBACK in (spec.on_alarm.promoted or ())}

    assert watched == {"error-rate", "ttft-p95", "adapter-latency", "oom", "breaker-trips", "engine-restarts"}


def test_fleet_yaml_watches_a_prod_promotion_for_a_day_and_an_unlisted_environment_gets_the_default() -> None:
    shipped = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
    endpoints = [{"name": "e", "variants": [PRIMARY.model_dump()]}]
    bare = FleetConfig.model_validate({"version": "t", "endpoints": endpoints})

    assert shipped.rollout_floors("prod").watch_after_promotion_seconds == DAY
    assert bare.rollout_floors("dev").watch_after_promotion_seconds == RolloutFloors().watch_after_promotion_seconds
    with pytest.raises(ValueError, match="watch_after_promotion_seconds"):
        RolloutFloors(watch_after_promotion_seconds=-1)
