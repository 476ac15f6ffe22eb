"""Release-calendar pre-scaling end to end on the moto server (HTTP, via AWS_ENDPOINT_URL)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from devtools.aws_resources import CoreResources, create_core_resources, create_endpoint
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease, LeaseScope
from fleetops.aws.retry import FAST_RETRY
from fleetops.aws.switches import ENGAGED, KillSwitch
from fleetops.capacity import ScheduledAction
from fleetops.config import FleetConfig
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.reconciler import PrescaleDeps, UnmanagedVariantError, reconcile

EP = "manga-chat-prod"


def fleet_config(
    recurring: list[dict[str, Any]] | None = None, off_peak: list[dict[str, Any]] | None = None
) -> FleetConfig:
    # baseline 12 rps / 4 rps per instance x 1.25 headroom -> 4 instances; x2 -> 8; x2.5 -> 10; x3 -> 12.
    return FleetConfig.model_validate(
        {
            "version": "test",
            "prescale": {"lead_time_minutes": 120, "scale_in_delay_minutes": 15, "planning_horizon_hours": 48},
            "endpoints": [
                {
                    "name": EP,
                    "variants": [
                        {
                            "name": "primary",
                            "capacity_rps_per_instance": 4,
                            "baseline_rps": 12,
                            "headroom": 1.25,
                            "floor": 2,
                            "cap": 20,
                        }
                    ],
                }
            ],
            "recurring": recurring or [],
            "off_peak": off_peak or [],
        }
    )


ONE_PIECE = {
    "name": "One Piece ch. 1100",
    "start": "2026-12-04T20:00",
    "timezone": "Asia/Tokyo",
    "duration_minutes": 180,
    "multiplier": 3,
    "reason": "One Piece chapter 1100",
}
FRIDAY = {
    "name": "friday-simulpub",
    "weekday": "friday",
    "local_time": "20:00",
    "timezone": "Asia/Tokyo",
    "duration_minutes": 120,
    "multiplier": 2.5,
}


@pytest.fixture
def resources() -> CoreResources:
    res = create_core_resources()
    create_endpoint(EP, {"primary": (4, 4, 20)})
    return res


@pytest.fixture
def deps(resources: CoreResources) -> PrescaleDeps:
    return PrescaleDeps(
        autoscaling=AutoScaling(retry=FAST_RETRY),
        calendar=CalendarTable(resources.calendar_table),
        audit=AuditTable(resources.audit_table),
        kill_switch=KillSwitch(resources.kill_switch_parameter),
        lease=EndpointLease(resources.lease_table),
    )


def actions(variant: str = "primary") -> dict[str, ScheduledAction]:
    return {a.name: a for a in AutoScaling().list_scheduled_actions(EP, variant, "prescale-")}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_new_event_schedules_capacity_lead_time_before_start_in_its_own_time_zone(deps: PrescaleDeps) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)

    plan = reconcile(fleet_config(), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)

    # 20:00 JST = 11:00Z; two hours earlier is 09:00Z = 18:00 JST. Ends 23:00 JST + 15 min delay.
    assert actions() == {
        "prescale-manga-chat-prod-primary-20261204T0900Z": ScheduledAction(
            name="prescale-manga-chat-prod-primary-20261204T0900Z",
            endpoint_name=EP,
            variant_name="primary",
            schedule="at(2026-12-04T18:00:00)",
            timezone="Asia/Tokyo",
            min_capacity=12,
            max_capacity=20,
        ),
        "prescale-manga-chat-prod-primary-20261204T1415Z": ScheduledAction(
            name="prescale-manga-chat-prod-primary-20261204T1415Z",
            endpoint_name=EP,
            variant_name="primary",
            schedule="at(2026-12-04T23:15:00)",
            timezone="Asia/Tokyo",
            min_capacity=4,
            max_capacity=20,
        ),
    }
    assert [c.outcome for c in plan.changes] == ["applied", "applied"]
    audit = AuditTable(deps.audit._table.name).list(EP)
    assert [(r.actor, r.outcome, r.action.split()[0]) for r in audit] == [("prescale", "applied", "create")] * 2
    assert audit[0].after is not None and audit[0].after["min_capacity"] in (12, 4)


def test_a_yearly_entry_in_the_calendar_table_schedules_capacity_for_its_day(deps: PrescaleDeps) -> None:
    # Spring anime announcements, every 1 April 10:00-14:00 JST, x2: the row an operator writes (README).
    deps.calendar.put(
        "spring-anime",
        {
            "kind": "yearly",
            "name": "Spring anime announcements",
            "month": 4,
            "day": 1,
            "local_time": "10:00",
            "end": "14:00",
            "timezone": "Asia/Tokyo",
            "multiplier": 2,
        },
    )

    plan = reconcile(fleet_config(), deps, now=at("2027-03-31T00:00"), trigger="test", dry_run=False)

    assert plan.invalid_entries == []
    # Two hours before 10:00 JST (01:00Z) is 08:00 JST = 23:00Z the day before; back to 4 at 14:15 JST.
    assert sorted((name, a.schedule, a.timezone, a.min_capacity) for name, a in actions().items()) == [
        ("prescale-manga-chat-prod-primary-20270331T2300Z", "at(2027-04-01T08:00:00)", "Asia/Tokyo", 8),
        ("prescale-manga-chat-prod-primary-20270401T0515Z", "at(2027-04-01T14:15:00)", "Asia/Tokyo", 4),
    ]
    reasons = {c.name: c.reason for c in plan.changes}
    assert reasons["prescale-manga-chat-prod-primary-20270331T2300Z"] == "Spring anime announcements (x2)"


def test_overlapping_events_take_the_larger_capacity(deps: PrescaleDeps) -> None:
    # Friday 2026-12-04: the weekly simulpub (x2.5, 20:00-22:00 JST) and One Piece (x3, 20:00-23:00 JST).
    deps.calendar.put("one-piece-1100", {**ONE_PIECE, "multiplier": 2})
    reconcile(fleet_config(recurring=[FRIDAY]), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)

    steps = sorted((a.schedule, a.min_capacity) for a in actions().values())
    # Both windows open at 18:00 JST: x2.5 (10) beats x2 (8). Simpulb's window closes at 22:15 -> One Piece's 8
    # until 23:15, then baseline 4.
    assert steps == [("at(2026-12-04T18:00:00)", 10), ("at(2026-12-04T22:15:00)", 8), ("at(2026-12-04T23:15:00)", 4)]


def test_daylight_saving_keeps_local_time_and_moves_utc(deps: PrescaleDeps) -> None:
    us_saturday = {
        "name": "us-saturday",
        "weekday": "saturday",
        "local_time": "10:00",
        "timezone": "America/Los_Angeles",
        "duration_minutes": 60,
        "multiplier": 2,
    }
    config = fleet_config(recurring=[us_saturday])
    config = config.model_copy(update={"prescale": config.prescale.model_copy(update={"planning_horizon_hours": 240})})

    reconcile(config, deps, now=at("2026-10-30T00:00"), trigger="test", dry_run=False)

    starts = sorted((name, a.schedule, a.timezone) for name, a in actions().items() if a.min_capacity == 8)
    # US daylight saving ends 2026-11-01: 08:00 PDT is 15:00Z, 08:00 PST is 16:00Z.
    assert starts == [
        ("prescale-manga-chat-prod-primary-20261031T1500Z", "at(2026-10-31T08:00:00)", "America/Los_Angeles"),
        ("prescale-manga-chat-prod-primary-20261107T1600Z", "at(2026-11-07T08:00:00)", "America/Los_Angeles"),
    ]


def test_off_peak_lowers_capacity_but_never_below_the_floor(deps: PrescaleDeps) -> None:
    night = {"name": "jp-night", "start": "01:00", "end": "08:00", "timezone": "Asia/Tokyo", "multiplier": 0.1}
    reconcile(fleet_config(off_peak=[night]), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)

    steps = sorted((a.schedule, a.min_capacity) for a in actions().values())
    assert steps[:2] == [("at(2026-12-04T01:00:00)", 2), ("at(2026-12-04T08:00:00)", 4)]


def test_a_second_run_changes_nothing(deps: PrescaleDeps) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    config = fleet_config(recurring=[FRIDAY])
    reconcile(config, deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)
    before = actions()

    again = reconcile(config, deps, now=at("2026-12-03T00:15"), trigger="test", dry_run=False)

    assert again.changes == []
    assert actions() == before


def test_a_removed_event_loses_its_actions(deps: PrescaleDeps) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    reconcile(fleet_config(), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)
    assert len(actions()) == 2

    deps.calendar.delete("one-piece-1100")
    plan = reconcile(fleet_config(), deps, now=at("2026-12-03T00:15"), trigger="test", dry_run=False)

    assert sorted(c.kind for c in plan.changes) == ["delete", "delete"]
    assert actions() == {}


def test_invalid_entries_are_reported_and_skipped_while_valid_ones_apply(deps: PrescaleDeps) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    deps.calendar.put("bad-zone", {**ONE_PIECE, "name": "bad-zone", "timezone": "Asia/Tokio"})
    deps.calendar.put("bad-multiplier", {**ONE_PIECE, "name": "bad-multiplier", "multiplier": 0})
    deps.calendar.put(
        "bad-end",
        {k: v for k, v in ONE_PIECE.items() if k != "duration_minutes"}
        | {"name": "bad-end", "end": "2026-12-04T19:00"},
    )
    deps.calendar.put("bad-endpoint", {**ONE_PIECE, "name": "bad-endpoint", "endpoints": ["no-such-endpoint"]})
    deps.calendar.put("bad-kind", {**ONE_PIECE, "name": "bad-kind", "kind": "monthly"})

    plan = reconcile(fleet_config(), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)

    problems = {e.name: " ".join(e.errors) for e in plan.invalid_entries}
    assert set(problems) == {"bad-zone", "bad-multiplier", "bad-end", "bad-endpoint", "bad-kind"}
    assert "unknown time zone 'Asia/Tokio'" in problems["bad-zone"]
    assert "greater than 0" in problems["bad-multiplier"]
    assert "is not after start" in problems["bad-end"]
    assert "unknown endpoint(s) ['no-such-endpoint']" in problems["bad-endpoint"]
    valid = "daily, off_peak, one_off, recurring, yearly"
    assert problems["bad-kind"] == f"kind: unknown kind 'monthly'; valid kinds: {valid}"
    assert len(actions()) == 2  # One Piece still scheduled


@pytest.mark.parametrize("switch", ["dry_run", "kill_switch"])
def test_dry_run_and_kill_switch_change_nothing_but_audit_the_plan(
    deps: PrescaleDeps, resources: CoreResources, switch: str
) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    if switch == "kill_switch":
        boto3.client("ssm").put_parameter(
            Name=resources.kill_switch_parameter, Value=ENGAGED, Type="String", Overwrite=True
        )

    plan = reconcile(fleet_config(), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=switch == "dry_run")

    assert plan.applied is False
    assert [c.kind for c in plan.changes] == ["create", "create"]
    assert actions() == {}
    audit = AuditTable(resources.audit_table).list(EP)
    assert [r.outcome for r in audit] == ["planned", "planned"]


def test_during_an_event_min_capacity_is_raised_now(deps: PrescaleDeps) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)

    # 19:30 JST: inside the lead window, the 18:00 action is already past.
    plan = reconcile(fleet_config(), deps, now=at("2026-12-04T10:30"), trigger="test", dry_run=False)

    assert sorted(c.kind for c in plan.changes) == ["create", "raise_min"]
    target = AutoScaling().get_target(EP, "primary")
    assert target is not None and target.min_capacity == 12


def test_a_rollouts_config_lease_does_not_hold_up_pre_scaling(deps: PrescaleDeps, resources: CoreResources) -> None:
    """A rollout holds the endpoint's config lease for up to a week; a release night inside it is still pre-scaled.

    Scheduled actions and MinCapacity are capacity, written under the capacity lease: the rollout's lease row is
    left exactly as it was (holder and fencing token), so the rollout's next CheckLease still passes.
    """
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    lease = EndpointLease(resources.lease_table)
    assert lease.acquire(EP, "canary_rollout/r-42", ttl_s=7 * 24 * 3600)
    rollouts = lease.current(EP)

    plan = reconcile(fleet_config(), deps, now=at("2026-12-04T10:30"), trigger="test", dry_run=False)

    assert plan.deferred_endpoints == []
    assert sorted((c.kind, c.outcome) for c in plan.changes) == [("create", "applied"), ("raise_min", "applied")]
    assert len(actions()) == 1
    target = AutoScaling().get_target(EP, "primary")
    assert target is not None and target.min_capacity == 12
    assert lease.current(EP) == rollouts
    assert lease.current(EP, scope=LeaseScope.CAPACITY) is None  # given back after the run
    audit = AuditTable(resources.audit_table).list(EP)
    assert sorted(r.outcome for r in audit) == ["applied", "applied"]


@pytest.mark.parametrize("holder", ["prescale/schedule-2026-12-02T23:59Z", "alarm_responder/queue-depth@19:02"])
def test_a_second_capacity_writer_defers_the_endpoint_and_the_audit_names_the_lease(
    deps: PrescaleDeps, resources: CoreResources, holder: str
) -> None:
    """Another reconciler run or an alarm's scale-out holds the capacity lease: this run changes nothing."""
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    assert EndpointLease(resources.lease_table).acquire(EP, holder, ttl_s=600, scope=LeaseScope.CAPACITY)

    plan = reconcile(fleet_config(), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)

    assert plan.deferred_endpoints == [EP]
    assert {c.outcome for c in plan.changes} == {"skipped"}
    assert actions() == {}
    (record,) = AuditTable(resources.audit_table).list(EP)
    assert (record.action, record.outcome) == ("defer 2 change(s)", "skipped")
    assert record.reason == f"capacity lease held by {holder}; retried on the next run"


def rollout_fleet(*variants: dict[str, Any]) -> FleetConfig:
    """fleet.yaml's endpoint EP with ``variants`` (the primary's sizing of :func:`fleet_config` when given none)."""
    config = fleet_config()
    listed = [config.endpoints[0].variants[0].model_dump(), *variants]
    return FleetConfig.model_validate(
        config.model_dump() | {"endpoints": [config.endpoints[0].model_dump() | {"variants": listed}]}
    )


CANARY = {"name": "canary", "role": "canary", "capacity_rps_per_instance": 4, "baseline_rps": 2, "floor": 1, "cap": 4}


def mid_rollout_canary() -> None:
    """The endpoint as a rollout leaves it: a canary variant beside the primary, given a scalable target of its own."""
    autoscaling = boto3.client("application-autoscaling")
    autoscaling.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=f"endpoint/{EP}/variant/canary",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=1,
        MaxCapacity=2,
    )


def test_during_a_rollout_the_canary_is_left_to_the_rollout_that_sizes_it_listed_in_fleet_yaml_or_not(
    deps: PrescaleDeps,
) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    mid_rollout_canary()

    unlisted = reconcile(rollout_fleet(), deps, now=at("2026-12-04T10:30"), trigger="test", dry_run=False)

    assert {(c.variant_name, c.outcome) for c in unlisted.changes} == {("primary", "applied")}
    assert [v.variant_name for v in unlisted.variants] == ["primary"]
    canary = AutoScaling().get_target(EP, "canary")
    assert canary is not None and (canary.min_capacity, canary.max_capacity) == (1, 2)
    assert actions("canary") == {}

    listed = reconcile(rollout_fleet(CANARY), deps, now=at("2026-12-04T10:30"), trigger="test", dry_run=False)

    # Listed too: its MinCapacity is the rollout step's size (fleetops.rollout.canary_capacity), not a schedule's.
    assert [v.variant_name for v in listed.variants] == ["primary"]
    assert listed.changes == [] and actions("canary") == {}
    after = AutoScaling().get_target(EP, "canary")
    assert after is not None and (after.min_capacity, after.max_capacity) == (1, 2)


def test_between_rollouts_a_canary_fleet_yaml_lists_does_not_stop_the_primarys_plan(deps: PrescaleDeps) -> None:
    """Between rollouts the canary variant is not there (no scalable target): the primary is still reconciled."""
    deps.calendar.put("one-piece-1100", ONE_PIECE)

    plan = reconcile(rollout_fleet(CANARY), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)

    assert [v.variant_name for v in plan.variants] == ["primary"]
    assert len(actions()) == 2 and actions("canary") == {}


class FailingAutoScaling(AutoScaling):
    """Test double: the real adapter, except that AWS refuses one named action (as after exhausted retries)."""

    def __init__(self, refuse: str) -> None:
        super().__init__(retry=FAST_RETRY)
        self.refuse = refuse

    def put_scheduled_action(self, action: ScheduledAction) -> None:
        if action.name == self.refuse:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "PutScheduledAction"
            )
        super().put_scheduled_action(action)


def test_a_failed_change_is_audited_and_the_next_run_repairs_it(deps: PrescaleDeps, resources: CoreResources) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    start = "prescale-manga-chat-prod-primary-20261204T0900Z"
    deps.autoscaling = FailingAutoScaling(refuse=start)

    plan = reconcile(fleet_config(), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)

    assert {c.name: c.outcome for c in plan.changes}[start] == "failed"
    assert start not in actions() and len(actions()) == 1
    failed = [r for r in AuditTable(resources.audit_table).list(EP) if r.outcome == "failed"]
    assert len(failed) == 1 and "Rate exceeded" in failed[0].reason

    deps.autoscaling = AutoScaling(retry=FAST_RETRY)
    repair = reconcile(fleet_config(), deps, now=at("2026-12-03T00:15"), trigger="test", dry_run=False)
    assert [(c.kind, c.name, c.outcome) for c in repair.changes] == [("create", start, "applied")]
    assert len(actions()) == 2


def test_a_variant_without_scalable_target_fails_the_run_after_the_others_are_reconciled(
    deps: PrescaleDeps,
) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)
    config = fleet_config()
    ghost = config.endpoints[0].model_copy(update={"name": "ghost-endpoint"})
    config = config.model_copy(update={"endpoints": (ghost, *config.endpoints)})

    with pytest.raises(UnmanagedVariantError, match="'ghost-endpoint' variant 'primary' has no scalable target"):
        reconcile(config, deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False)

    assert len(actions()) == 2  # manga-chat-prod was still reconciled


def test_a_stack_manages_only_the_endpoints_of_its_environment(deps: PrescaleDeps) -> None:
    deps.calendar.put("one-piece-1100", ONE_PIECE)

    dev_plan = reconcile(fleet_config(), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False,
                         environment="dev")  # fmt: skip
    assert dev_plan.variants == [] and actions() == {}  # manga-chat-prod is a prod endpoint

    prod_plan = reconcile(fleet_config(), deps, now=at("2026-12-03T00:00"), trigger="test", dry_run=False,
                          environment="prod")  # fmt: skip
    assert len(prod_plan.changes) == 2 and len(actions()) == 2
