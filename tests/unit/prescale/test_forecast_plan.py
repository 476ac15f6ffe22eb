"""The MinCapacity plan from a variant's own history, the fallback to the configured levels, the scheduled-action
quota, and the reconciler's once-a-day report of a forecast above the cap.

Every level below is computed by hand: an instance serves 4 requests/s, so a need is ceil(rps x headroom / 4),
clamped to [floor 2, cap 12]; a level holds from ``lead_time_minutes`` (20) before the first slot that needs it
until ``scale_in_delay_minutes`` (15) after the last one ends.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from botocore.exceptions import ClientError
from pydantic import ValidationError

from fleetops.audit import AuditRecord
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.notifier import Notifier
from fleetops.aws.switches import KillSwitch
from fleetops.calendar import Occurrence, RecurringEvent
from fleetops.capacity import ScalableTarget, ScheduledAction
from fleetops.config import EndpointConfig, FleetConfig, PrescaleSettings, VariantConfig
from fleetops.prescale import planner
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.demand_history import DemandHistory
from fleetops.prescale.event_sizes import EventSize
from fleetops.prescale.forecast import SLOT, SLOTS_PER_WEEK, WEEK, DemandSeries
from fleetops.prescale.forecast_plan import plan_from_history
from fleetops.prescale.models import OverCap, Step
from fleetops.prescale.reconciler import PrescaleDeps, plan_variant, reconcile
from fleetops.prescale.served_capacity import MinuteLoad

T0 = datetime(2026, 11, 4, tzinfo=UTC)  # a Wednesday, midnight UTC: the history's first slot
NOW = T0 + 3 * WEEK  # Wednesday 2026-11-25, midnight UTC: three whole weeks of history behind it
VARIANT = VariantConfig(name="primary", capacity_rps_per_instance=4, baseline_rps=8, headroom=1.0, floor=2, cap=12)
SETTINGS = PrescaleSettings(
    lead_time_minutes=20,
    scale_in_delay_minutes=15,
    planning_horizon_hours=24,
    history_days=21,
    min_history_days=7,
    min_event_occurrences=2,
)

Rate = Callable[[datetime], float]


def at(hhmm: str, day: datetime = NOW) -> datetime:
    hours, minutes = hhmm.split(":")
    return day + timedelta(hours=int(hours), minutes=int(minutes))


def history(rate: Rate, start: datetime = T0, end: datetime = NOW) -> DemandSeries:
    return DemandSeries(start, tuple(rate(start + i * SLOT) for i in range(int((end - start) / SLOT))))


def flat(rps: float) -> Rate:
    return lambda _: rps


def busy_evenings(*levels: tuple[str, str, float], usual: float = 8.0) -> Rate:
    """``usual`` requests/s, except each day between the given UTC times."""

    def rate(slot: datetime) -> float:
        clock = f"{slot:%H:%M}"
        return next((rps for start, end, rps in levels if start <= clock < end), usual)

    return rate


def steps_of(steps: list[Step]) -> list[tuple[datetime, int]]:
    return [(s.at, s.min_capacity) for s in steps]


# plan_from_history


def test_capacity_steps_up_a_lead_time_before_the_busy_hours_and_down_a_delay_after_them() -> None:
    # 8 req/s all day (2 instances), 16 req/s from 18:00 to 20:00 UTC (4 instances), every day for three weeks.
    series = history(busy_evenings(("18:00", "20:00", 16.0)))

    plan = plan_from_history(VARIANT, [], SETTINGS, NOW, series)

    assert plan.current == 2
    assert steps_of(plan.steps) == [(at("17:40"), 4), (at("20:15"), 2)]
    assert plan.steps[0].reason == "forecast 16.0 req/s at Wed 18:00 UTC"
    assert plan.steps[0].timezone == "UTC"
    assert plan.summary.model_dump() == {
        "source": "history",
        "why": "forecast from 21.0 days of the variant's own Invocations",
        "history_days": 21.0,
        "weekly_growth": 1.0,
        "level_ratio": 1.0,
        "configured_baseline_rps": 8.0,
        "forecast_low_rps": 8.0,
        "forecast_peak_rps": 16.0,
    }
    assert (plan.sizes, plan.over_cap) == ([], [])


def test_headroom_is_added_before_rounding_up_to_whole_instances() -> None:
    # 8 x 1.25 / 4 = 2.5 -> 3 instances; 16 x 1.25 / 4 = 5 instances.
    variant = VARIANT.model_copy(update={"headroom": 1.25})
    series = history(busy_evenings(("18:00", "20:00", 16.0)))

    plan = plan_from_history(variant, [], SETTINGS, NOW, series)

    assert plan.current == 3
    assert steps_of(plan.steps) == [(at("17:40"), 5), (at("20:15"), 3)]


def test_a_growing_variant_is_planned_for_next_weeks_traffic() -> None:
    # Weeks at 10, 11 and 12.1 req/s: growth 1.1, so every past week forecasts 13.31 req/s -> ceil(3.3275) = 4.
    series = DemandSeries(T0, (10.0,) * SLOTS_PER_WEEK + (11.0,) * SLOTS_PER_WEEK + (12.1,) * SLOTS_PER_WEEK)

    plan = plan_from_history(VARIANT, [], SETTINGS, NOW, series)

    assert (plan.current, plan.steps) == (4, [])
    assert plan.summary.weekly_growth == 1.1
    assert (plan.summary.forecast_low_rps, plan.summary.forecast_peak_rps) == (13.31, 13.31)


WEDNESDAY_DROP = RecurringEvent.model_validate(
    {
        "name": "wednesday-drop",
        "reason": "Wednesday drop",
        "weekday": "wednesday",
        "local_time": "10:00",
        "duration_minutes": 60,
        "timezone": "UTC",
        "multiplier": 2.0,
    }
)


def drops(entry: RecurringEvent = WEDNESDAY_DROP) -> list[Occurrence]:
    """Its occurrences from the history's start to past the horizon: three past Wednesdays and today."""
    found = entry.occurrences(T0, NOW + timedelta(hours=26))
    assert [o.start for o in found] == [at("10:00", T0 + k * WEEK) for k in range(4)]
    return found


def test_the_busy_hour_of_users_whose_clocks_changed_is_planned_at_their_local_time() -> None:
    # Los Angeles users: 16 req/s from 09:00 to 10:00 local time (4 instances), 8 otherwise (2). The clocks went
    # forward on 2026-03-08; planned at Monday 2026-03-16 00:00 local from the three weeks before, two of them
    # in winter time. With the variant's traffic_timezone the rise comes the lead time (20 min) before 09:00 PDT
    # (16:00 UTC); read 168 hours back, it would come an hour late.
    la = ZoneInfo("America/Los_Angeles")
    now = datetime(2026, 3, 16, 7, tzinfo=UTC)
    series = history(lambda slot: 16.0 if slot.astimezone(la).hour == 9 else 8.0, start=now - 3 * WEEK, end=now)
    local = VariantConfig.model_validate({**VARIANT.model_dump(), "traffic_timezone": "America/Los_Angeles"})

    rises = [s.at for s in plan_from_history(local, [], SETTINGS, now, series).steps if s.min_capacity == 4]
    assert rises[0] == datetime(2026, 3, 16, 15, 40, tzinfo=UTC)
    rises = [s.at for s in plan_from_history(VARIANT, [], SETTINGS, now, series).steps if s.min_capacity == 4]
    assert rises[0] == datetime(2026, 3, 16, 16, 40, tzinfo=UTC)


def test_a_traffic_timezone_that_is_no_time_zone_is_refused_with_what_to_use() -> None:
    with pytest.raises(ValidationError, match="unknown time zone 'Pacific/Hollywood'"):
        VariantConfig.model_validate({**VARIANT.model_dump(), "traffic_timezone": "Pacific/Hollywood"})


def test_a_recurring_event_is_planned_at_the_size_it_really_had_and_from_when_its_traffic_really_arrived() -> None:
    # Configured at x2, but on each past Wednesday traffic was 24 req/s (3 x 8) from 09:50 to 11:00.
    variant = VARIANT.model_copy(update={"headroom": 1.25})
    series = history(lambda slot: 24.0 if slot.weekday() == 2 and "09:50" <= f"{slot:%H:%M}" < "11:00" else 8.0)

    plan = plan_from_history(variant, drops(), SETTINGS, NOW, series)

    # ceil(8 x 3 x 1.25 / 4) = ceil(7.5) = 8, from 20 minutes before 09:50 to 15 minutes after 11:00.
    assert plan.current == 3
    assert steps_of(plan.steps) == [(at("09:30"), 8), (at("11:15"), 3)]
    assert plan.steps[0].reason == "forecast 24.0 req/s at Wed 09:50 UTC; Wednesday drop (learned x3)"
    assert plan.sizes == [
        EventSize(
            name="wednesday-drop",
            kind="recurring",
            configured=2.0,
            learned=3.0,
            occurrences=3,
            early_minutes=10,
            used="learned",
            why="peak over everyday demand in the last 3 occurrence(s)",
        )
    ]
    # The event's own traffic never entered the everyday forecast.
    assert (plan.summary.forecast_low_rps, plan.summary.forecast_peak_rps) == (8.0, 8.0)


def test_a_learned_event_above_the_cap_is_held_at_the_cap() -> None:
    # ceil(24 x 1.25 / 4) = 8 instances needed, cap 7: held at 7, reported over the cap. 7 instances serve 28 req/s,
    # more than the 24 forecast, so no request is at risk: only the headroom is missing.
    variant = VARIANT.model_copy(update={"headroom": 1.25, "cap": 7})
    series = history(lambda slot: 24.0 if slot.weekday() == 2 and "10:00" <= f"{slot:%H:%M}" < "11:00" else 8.0)

    plan = plan_from_history(variant, drops(), SETTINGS, NOW, series)

    assert steps_of(plan.steps) == [(at("09:40"), 7), (at("11:15"), 3)]
    # 24 rps needs 8 with the headroom, but 7 instances serve 28 at their rated rate: nothing would fail, so
    # nothing is reported (a report says how many requests would fail).
    assert plan.over_cap == []


def test_an_event_that_brought_no_extra_traffic_leaves_the_everyday_level() -> None:
    # Configured at x2 (4 instances), but past Wednesdays looked like any other day: learned x1.
    plan = plan_from_history(VARIANT, drops(), SETTINGS, NOW, history(flat(8.0)))

    assert (plan.current, plan.steps) == (2, [])
    assert [(s.learned, s.used) for s in plan.sizes] == [(1.0, "learned")]


def evenings_gone_since(days: int) -> Rate:
    """16 req/s from 18:00 to 22:00 UTC every day, but 8 (the rest of the day's level) on the last ``days`` days."""
    usual = busy_evenings(("18:00", "22:00", 16.0))
    return lambda slot: 8.0 if slot >= NOW - timedelta(days=days) else usual(slot)


def test_an_evening_busy_hour_gone_on_each_of_its_last_two_days_is_no_longer_held() -> None:
    # Three weeks with the busy evening (4 instances), then two days without it: the seasonal median still
    # forecasts 16 req/s, but 8 / 16 on both days cuts that time of day to 8 (2 instances). At its edges the hour
    # around each slot that judges it is partly the usual level, so the cut there is partial (3 instances).
    plan = plan_from_history(VARIANT, [], SETTINGS, NOW, history(evenings_gone_since(2)))

    assert max(s.min_capacity for s in plan.steps) == 3
    # At 18:00 the hour judged is 6 slots at 8 and 7 at 16 (x0.97, the last week's lower trend): 104 / 155.
    assert [s.reason for s in plan.steps if s.min_capacity == 3] == [
        "forecast 10.3 req/s at Wed 18:00 UTC (this time of day x0.67 on its last days)",
        "forecast 8.2 req/s at Wed 21:30 UTC (this time of day x0.54 on its last days)",
    ]
    assert [level_at(plan.current, plan.steps, at(hhmm)) for hhmm in ("17:00", "19:00", "20:00", "21:00", "23:00")] == [
        2,
        2,
        2,
        2,
        2,
    ]


def test_one_evening_without_its_busy_hour_is_a_quiet_day_and_changes_nothing() -> None:
    plan = plan_from_history(VARIANT, [], SETTINGS, NOW, history(evenings_gone_since(1)))

    assert steps_of(plan.steps) == [(at("17:40"), 4), (at("22:15"), 2)]


def test_a_day_whose_evening_was_a_calendar_event_is_passed_over_for_the_day_before() -> None:
    # The busy evening was gone on the last three days, but yesterday's evening was a calendar event (bridged over
    # in the everyday series): the two days before it decide.
    tuesday = RecurringEvent(
        name="tuesday-drop",
        weekday="tuesday",
        local_time="18:00",
        timezone="UTC",
        duration_minutes=240,
        multiplier=1.0,
        reason="Tuesday drop",
    )
    occurrences = tuesday.occurrences(T0, NOW + timedelta(hours=26))

    plan = plan_from_history(VARIANT, occurrences, SETTINGS, NOW, history(evenings_gone_since(3)))
    assert level_at(plan.current, plan.steps, at("20:00")) == 2

    plan = plan_from_history(VARIANT, occurrences, SETTINGS, NOW, history(evenings_gone_since(2)))  # and Monday
    assert level_at(plan.current, plan.steps, at("20:00")) == 4


def test_a_scale_in_delay_that_is_not_a_whole_number_of_slots_still_plans_and_holds_at_least_that_long() -> None:
    # scale_in_delay_minutes accepts any whole number of minutes from 10; 12 is not a multiple of the 5-minute slot.
    settings = SETTINGS.model_copy(update={"scale_in_delay_minutes": 12})
    series = history(busy_evenings(("18:00", "20:00", 16.0)))

    plan = plan_from_history(VARIANT, [], settings, NOW, series)

    assert plan.current == 2
    assert steps_of(plan.steps)[0] == (at("17:40"), 4)
    [down] = plan.steps[1:]
    assert down.min_capacity == 2
    assert down.at >= at("20:12")  # the busy hours end at 20:00


def test_a_two_week_horizon_on_one_week_of_history_plans_every_day_from_it() -> None:
    # planning_horizon_hours allows 14 days and history_days 7 is enough history: the last days of the horizon are
    # two weeks past the only week the history holds.
    settings = SETTINGS.model_copy(update={"planning_horizon_hours": 14 * 24, "history_days": 7})
    now = T0 + WEEK
    series = history(busy_evenings(("18:00", "20:00", 16.0)), start=T0, end=now)

    plan = plan_from_history(VARIANT, [], settings, now, series)

    day = timedelta(days=1)
    assert plan.current == 2
    assert steps_of(plan.steps) == [
        step for d in range(14) for step in ((at("17:40", now + d * day), 4), (at("20:15", now + d * day), 2))
    ]


def test_a_forecast_above_the_cap_reports_the_requests_the_cap_cannot_serve() -> None:
    # 56 req/s from 18:00 (14 instances), 60 from 19:00 (15), cap 12 = 48 req/s:
    # 12 slots x (56 - 48) x 300 s + 12 slots x (60 - 48) x 300 s = 28 800 + 43 200 requests.
    series = history(busy_evenings(("18:00", "19:00", 56.0), ("19:00", "20:00", 60.0)))

    plan = plan_from_history(VARIANT, [], SETTINGS, NOW, series)

    assert steps_of(plan.steps) == [(at("17:40"), 12), (at("20:15"), 2)]
    assert plan.over_cap == [
        OverCap(start=at("18:00"), end=at("20:00"), peak_instances=15, cap=12, requests_at_risk=72_000)
    ]
    assert plan.summary.forecast_peak_rps == 60.0


# plan_variant: the history when there is enough of it, else the configured levels


CONFIG = FleetConfig(version="test", prescale=SETTINGS, endpoints=(EndpointConfig(name="ep", variants=(VARIANT,)),))


class FakeHistory(DemandHistory):
    """The variant's Invocations: ``days`` of ``rate`` before the end of the asked span; or ``error``. Its minutes
    of ``InvocationsPerInstance`` and ``QueueDepth``: ``loads`` (or ``error``)."""

    def __init__(
        self, rate: Rate, days: float = 21, error: Exception | None = None, loads: Sequence[MinuteLoad] = ()
    ) -> None:  # no client
        self.rate, self.days, self.error, self.loads = rate, days, error, list(loads)
        self.calls: list[tuple[str, str, datetime, datetime]] = []
        self.load_calls: list[tuple[datetime, datetime]] = []

    def minute_loads(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> list[MinuteLoad]:
        self.load_calls.append((start, end))
        if self.error is not None:
            raise self.error
        return [m for m in self.loads if start <= m.at < end]

    def invocations(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> DemandSeries:
        self.calls.append((endpoint_name, variant_name, start, end))
        if self.error is not None:
            raise self.error
        first = end - timedelta(days=self.days)
        slots = int((end - start) / SLOT)
        rps = [None if start + i * SLOT < first else self.rate(start + i * SLOT) for i in range(slots)]
        return DemandSeries(start, tuple(rps))


def configured_plan() -> tuple[int, list[Step]]:
    current, steps = planner.timeline(VARIANT, drops(), SETTINGS, NOW)
    # x2 = ceil(16 / 4) = 4 instances from 20 minutes before 10:00 to 15 minutes after 11:00.
    assert (current, steps_of(steps)) == (2, [(at("09:40"), 4), (at("11:15"), 2)])
    return current, steps


def test_without_a_history_reader_the_plan_is_the_configured_one() -> None:
    plan = plan_variant(CONFIG, "ep", VARIANT, drops(), NOW, None)

    assert plan.summary.source == "configuration"
    assert "configured levels" in plan.summary.why
    assert (plan.current, plan.steps) == configured_plan()


def test_history_days_zero_never_reads_the_history() -> None:
    reader = FakeHistory(flat(8.0))
    config = CONFIG.model_copy(update={"prescale": SETTINGS.model_copy(update={"history_days": 0})})

    plan = plan_variant(config, "ep", VARIANT, drops(), NOW, reader)

    assert reader.calls == []
    assert plan.summary.source == "configuration"
    assert plan.summary.why == "history_days is 0: configured levels"
    assert (plan.current, plan.steps) == configured_plan()


def test_a_new_endpoint_with_three_days_of_history_is_planned_from_the_configured_levels() -> None:
    reader = FakeHistory(flat(8.0), days=3)

    plan = plan_variant(CONFIG, "ep", VARIANT, drops(), NOW, reader)

    assert reader.calls == [("ep", "primary", NOW - timedelta(days=21), NOW)]
    assert plan.summary.source == "configuration"
    assert plan.summary.why == "3.0 days of Invocations history, 7 needed: configured levels"
    assert (plan.current, plan.steps) == configured_plan()


def test_a_history_that_cannot_be_read_falls_back_to_the_configured_levels_and_says_so() -> None:
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "not allowed"}}, "GetMetricData")

    plan = plan_variant(CONFIG, "ep", VARIANT, drops(), NOW, FakeHistory(flat(8.0), error=denied))

    assert plan.summary.source == "configuration"
    assert plan.summary.why.startswith("could not read the Invocations history (")
    assert "AccessDenied" in plan.summary.why
    assert (plan.current, plan.steps) == configured_plan()


def test_three_weeks_of_history_plan_from_the_history() -> None:
    plan = plan_variant(CONFIG, "ep", VARIANT, drops(), NOW, FakeHistory(flat(8.0)))

    assert plan.summary.source == "history"
    assert plan.summary.history_days == 21.0
    assert (plan.current, plan.steps) == (2, [])  # the event never brought extra traffic


# within_quota: at most ``limit`` scheduled actions, merging the cheapest neighbours first


START = datetime(2026, 12, 4, tzinfo=UTC)
HORIZON_END = START + timedelta(hours=24)


def step(hhmm: str, level: int) -> Step:
    return Step(at=at(hhmm, START), min_capacity=level, timezone="UTC", reason=f"to {level}")


def level_at(current: int, steps: list[Step], when: datetime) -> int:
    level = current
    for s in steps:
        if s.at <= when:
            level = s.min_capacity
    return level


def test_a_plan_within_the_quota_is_kept_as_it_is() -> None:
    plan = [step("08:00", 6), step("12:00", 3)]
    assert planner.within_quota(3, plan, 2, HORIZON_END) == (plan, [])


def test_the_merges_that_cost_the_fewest_instance_hours_go_first() -> None:
    plan = [
        step("08:00", 6),
        step("08:30", 5),  # merging 08:30 into its neighbours costs 1 instance x 30 min either way
        step("09:00", 6),
        step("12:00", 3),
        step("18:00", 4),  # a 5-minute blip to 4
        step("18:05", 3),
    ]
    # Two merges at 0.5 instance-hours, then (after the 08:00-12:00 stretch is one 6) the cheapest is keeping the
    # 18:00 blip's 4 to the horizon: 1 x 5 h 55 min, against 1 x 6 h for starting it at 12:00, 3 x 6 h for holding 6.
    kept, dropped = planner.within_quota(3, plan, 3, HORIZON_END)

    assert steps_of(kept) == [(at("08:00", START), 6), (at("12:00", START), 3), (at("18:00", START), 4)]
    assert steps_of(dropped) == [(at("08:30", START), 5), (at("09:00", START), 6), (at("18:05", START), 3)]


def test_a_step_raised_by_a_merge_says_so() -> None:
    plan = [step("08:00", 4), step("09:00", 5), step("10:00", 4), step("20:00", 2)]
    # First 08:00-09:00 at 5 instead of 4 (1 instance-hour, against 10 and 8 for the others); then 20:00-24:00 at 4
    # instead of 2 (8), cheaper than 10:00-20:00 at 5 instead of 4 (10).
    kept, dropped = planner.within_quota(2, plan, 2, HORIZON_END)

    assert steps_of(kept) == [(at("08:00", START), 5), (at("10:00", START), 4)]
    assert kept[0].reason == "to 4 (merged to stay in quota)"
    assert kept[1].reason == "to 4"
    assert steps_of(dropped) == [(at("09:00", START), 5), (at("20:00", START), 2)]


def test_a_step_rising_from_the_level_in_force_now_is_never_merged_into_it() -> None:
    # Merging the 00:05 rise into the level in force now would cost nothing in the formula (the stretch before it
    # has no length) but would raise capacity now, not at 00:05.
    plan = [step("00:05", 3), step("00:10", 2), step("12:00", 6), step("13:00", 2)]

    kept, dropped = planner.within_quota(2, plan, 2, HORIZON_END)

    assert steps_of(kept) == [(at("00:05", START), 6), (at("13:00", START), 2)]
    assert steps_of(dropped) == [(at("00:10", START), 2), (at("12:00", START), 6)]


def test_with_precise_until_the_steps_further_ahead_are_merged_first() -> None:
    # Two identical 30-minute dips, one this morning and one tomorrow: filling either costs 0.5 instance-hours.
    plan = [step("08:00", 3), step("08:30", 4)]
    plan += [s.model_copy(update={"at": s.at + timedelta(days=1)}) for s in plan]
    horizon_end = START + timedelta(days=2)

    kept, dropped = planner.within_quota(4, plan, 2, horizon_end, precise_until=START + timedelta(hours=24))

    assert steps_of(kept) == [(at("08:00", START), 3), (at("08:30", START), 4)]  # today's dip kept
    assert len(dropped) == 2  # tomorrow's is held at 4: the reconciler plans it again before it comes
    # Without it, the first of two equal merges goes: today's dip.
    kept, _ = planner.within_quota(4, plan, 2, horizon_end)
    assert steps_of(kept) == [(s.at, s.min_capacity) for s in plan[2:]]


@pytest.mark.parametrize("seed", range(8))
def test_merging_never_lowers_capacity_below_the_plan(seed: int) -> None:
    chance = random.Random(seed)
    current = chance.randint(2, 12)
    times = sorted(chance.sample(range(1, 288), 60))
    plan: list[Step] = []
    previous = current
    for slot in times:
        level = chance.choice([n for n in range(2, 13) if n != previous])
        plan.append(Step(at=START + slot * SLOT, min_capacity=level, timezone="UTC", reason=""))
        previous = level

    kept, dropped = planner.within_quota(current, plan, 10, HORIZON_END)

    assert len(kept) <= 10
    assert sorted([s.at for s in kept] + [s.at for s in dropped]) == [s.at for s in plan]
    for hour in range(24):
        for minute in range(0, 60, 5):
            when = START + timedelta(hours=hour, minutes=minute)
            assert level_at(current, kept, when) >= level_at(current, plan, when), when


def test_four_hundred_alternating_steps_are_cut_to_the_quota_and_every_step_is_accounted_for() -> None:
    plan = [
        Step(at=START + (i + 1) * timedelta(minutes=15), min_capacity=4 if i % 2 == 0 else 2, timezone="UTC", reason="")
        for i in range(400)
    ]
    horizon_end = START + timedelta(hours=168)

    kept, dropped = planner.within_quota(2, plan, 150, horizon_end)

    assert len(kept) <= 150
    assert len(kept) + len(dropped) == 400
    assert sorted([s.at for s in kept] + [s.at for s in dropped]) == [s.at for s in plan]
    for i in range(int((horizon_end - START) / SLOT)):
        when = START + i * SLOT
        assert level_at(2, kept, when) >= level_at(2, plan, when), when


# The reconciler end to end on in-memory adapters: a forecast above the cap is audited and sent once a day


class MemoryAutoScaling(AutoScaling):
    def __init__(self, target: ScalableTarget) -> None:  # no client
        self.target = target
        self.actions: dict[str, ScheduledAction] = {}

    def get_target(self, endpoint_name: str, variant_name: str) -> ScalableTarget | None:
        return self.target

    def set_capacity(self, endpoint_name: str, variant_name: str, min_capacity: int, max_capacity: int) -> None:
        self.target = ScalableTarget(min_capacity=min_capacity, max_capacity=max_capacity)

    def list_scheduled_actions(self, endpoint_name: str, variant_name: str, prefix: str) -> list[ScheduledAction]:
        return [a for name, a in sorted(self.actions.items()) if name.startswith(prefix)]

    def put_scheduled_action(self, action: ScheduledAction) -> None:
        self.actions[action.name] = action

    def delete_scheduled_action(self, action: ScheduledAction) -> None:
        self.actions.pop(action.name, None)


class NoRows(CalendarTable):
    def __init__(self) -> None:  # no table
        pass

    def one_off_entries(self) -> list[dict[str, Any]]:
        return []


class MemoryAudit(AuditTable):
    def __init__(self) -> None:  # no table
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> AuditRecord:
        record = record.with_id()
        self.records.append(record)
        return record

    def append_once(self, record: AuditRecord) -> bool:
        if any(r.record_id == record.record_id for r in self.records):
            return False
        self.write(record)
        return True


class Released(KillSwitch):
    def __init__(self) -> None:  # no parameter
        pass

    def engaged(self) -> bool:
        return False


class RecordingNotifier(Notifier):
    def __init__(self) -> None:  # no topic
        self.sent: list[tuple[str, str]] = []

    def publish(self, subject: str, message: str) -> str | None:
        self.sent.append((subject, message))
        return f"message-{len(self.sent)}"


def over_cap_deps(horizon_hours: int = 24) -> tuple[FleetConfig, PrescaleDeps, MemoryAudit, RecordingNotifier]:
    config = CONFIG.model_copy(
        update={"prescale": SETTINGS.model_copy(update={"planning_horizon_hours": horizon_hours})}
    )
    audit, notifier = MemoryAudit(), RecordingNotifier()
    deps = PrescaleDeps(
        autoscaling=MemoryAutoScaling(ScalableTarget(min_capacity=2, max_capacity=12)),
        calendar=NoRows(),
        audit=audit,
        kill_switch=Released(),
        history=FakeHistory(busy_evenings(("18:00", "19:00", 56.0), ("19:00", "20:00", 60.0)), days=28),
        notifier=notifier,
    )
    return config, deps, audit, notifier


def over_cap_records(audit: MemoryAudit) -> list[AuditRecord]:
    return [r for r in audit.records if r.action.startswith("forecast over cap")]


def test_a_forecast_above_the_cap_is_audited_and_sent_once_a_day() -> None:
    config, deps, audit, notifier = over_cap_deps()

    plan = reconcile(config, deps, now=at("01:00"), trigger="schedule", dry_run=False)

    assert [(c.kind, c.outcome) for c in plan.changes] == [("create", "applied"), ("create", "applied")]
    expected = (
        "the forecast needs up to 15 instances, above the cap of 12, in Wed 18:00-20:00 UTC: about 72000 requests "
        "would fail or time out; raise the variant's cap in fleet.yaml (and the scalable target's MaxCapacity)"
    )
    [record] = over_cap_records(audit)
    assert (record.action, record.outcome, record.reason) == ("forecast over cap ep/primary", "skipped", expected)
    assert record.after == {"key": "ep/primary@2026-11-25"}
    assert notifier.sent == [("[prescale] forecast above the cap on ep/primary", expected)]

    written = len(audit.records)
    second = reconcile(config, deps, now=at("01:15"), trigger="schedule", dry_run=False)

    assert second.changes == []
    assert len(audit.records) == written
    assert len(notifier.sent) == 1


def test_a_forecast_above_the_cap_already_under_way_is_sent_once_not_at_every_run() -> None:
    # The reconciler runs every 15 minutes. From 18:30, inside the stretch, with a 12-hour horizon (to 06:30 the next
    # morning), each run sees the same stretch 18:00-20:00 from its own now: one finding, one notice.
    config, deps, audit, notifier = over_cap_deps(horizon_hours=12)

    for run in ("18:30", "18:45", "19:00"):
        reconcile(config, deps, now=at(run), trigger="schedule", dry_run=False)

    assert len(over_cap_records(audit)) == 1
    assert len(notifier.sent) == 1


def wednesdays_then(today_rps: float, now: datetime) -> DemandSeries:
    """Four weeks at 20 req/s, 40 during each Wednesday's 10:00 drop, then ``today_rps`` from midnight to ``now``."""

    def rate(slot: datetime) -> float:
        if slot >= NOW:
            return today_rps
        return 40.0 if slot >= T0 and slot.weekday() == 2 and "10:00" <= f"{slot:%H:%M}" < "11:00" else 20.0

    return history(rate, start=T0 - WEEK, end=now)


def test_a_quiet_morning_lowers_the_hours_ahead_but_not_an_event_sized_over_the_usual_level() -> None:
    # Past Wednesdays: 20 req/s all day (5 instances), 40 during the 10:00 drop (learned x2: 10 instances).
    # Today ran at 11 req/s since midnight, 0.55 of the forecast: the plan at 08:00 lowers today's everyday
    # level by 0.55 ** exp(-hours ahead / 6), and keeps the drop at the size learned over the usual 20.
    # Four weeks of history, so that the trend (the median of three week-over-week ratios) stays 1.0.
    now = at("08:00")
    plan = plan_from_history(VARIANT, drops(), SETTINGS, now, wednesdays_then(11.0, now))

    assert plan.summary.level_ratio == 0.55
    assert plan.current == 3  # 08:00 to 08:20: about 11 req/s -> 3 instances (5 without today's level)
    assert steps_of(plan.steps) == [
        (at("08:40"), 4),  # 09:00, 1 h ahead: 20 x 0.55 ** exp(-1 / 6) = 12.05 req/s -> 4 (08:55: 11.97 -> 3)
        (at("09:40"), 10),  # the drop: 20 x 2 = 40 req/s -> 10, 20 minutes before 10:00
        (at("11:15"), 4),  # 11:00, 3 h ahead: 20 x 0.55 ** 0.607 = 13.9 req/s -> 4
        (at("13:35"), 5),  # 13:55, 5.92 h ahead: 20 x 0.55 ** 0.373 = 16.0 req/s -> 5, and 5 from then on
    ]
    assert plan.steps[1].reason == "forecast 40.0 req/s at Wed 10:00 UTC; Wednesday drop (learned x2)"


def test_a_busy_morning_sizes_up_the_event_ahead_and_leaves_the_everyday_level_to_target_tracking() -> None:
    # The same Wednesdays; today ran at 30 req/s since midnight, 1.5x the forecast. The everyday level stays
    # the forecast's 5 instances (traffic above it is target tracking's); the drop, learned as x2 over the usual
    # level, is sized over today's: 40 x 1.5 ** exp(-2 / 6) = 53.5 req/s at 10:00, 2 h ahead -> 14 instances.
    now = at("08:00")
    roomy = VARIANT.model_copy(update={"cap": 20})
    plan = plan_from_history(roomy, drops(), SETTINGS, now, wednesdays_then(30.0, now))

    assert plan.summary.level_ratio == 1.5
    assert plan.current == 5
    # The correction fades with the hours ahead: from 10:40 (2 h 40 min ahead), 40 x 1.5 ** 0.641 = 51.9 -> 13.
    assert steps_of(plan.steps) == [(at("09:40"), 14), (at("10:55"), 13), (at("11:15"), 5)]
    assert plan.steps[0].reason == "forecast 53.5 req/s at Wed 10:00 UTC; Wednesday drop (learned x2)"


def test_a_morning_within_ten_percent_of_the_forecast_plans_as_if_it_were_usual() -> None:
    def rate(slot: datetime) -> float:
        return 18.5 if slot >= NOW else 20.0

    now = at("08:00")
    plan = plan_from_history(VARIANT, [], SETTINGS, now, history(rate, end=now))

    assert (plan.summary.level_ratio, plan.current, plan.steps) == (1.0, 5, [])


def queued_minutes(rps: float, count: int, queue: float = 6.0) -> list[MinuteLoad]:
    """``count`` minutes of last evening, each ``rps`` per instance with ``queue`` requests waiting per instance,
    and one more either side (a minute counts with both neighbours, across which its queue's growth is read)."""
    return [MinuteLoad(NOW - timedelta(hours=6) + timedelta(minutes=i), rps, queue) for i in range(count + 2)]


def test_instances_that_served_less_than_configured_lower_the_rate_every_level_divides_by() -> None:
    # Three weeks of flat 8 req/s at the configured 4/s per instance: 2 instances. Forty minutes with a queue at
    # 2.4/s per instance: the plan counts on 90 % of that, 2.16/s, so 8 / 2.16 = 3.7 -> 4 instances.
    config, deps, audit, notifier = over_cap_deps()
    deps.history = FakeHistory(flat(8.0), loads=queued_minutes(2.4, 40))

    plan = reconcile(config, deps, now=NOW, trigger="schedule", dry_run=False)

    [variant] = plan.variants
    assert variant.served_capacity is not None
    assert (variant.served_capacity.served_rps, variant.served_capacity.used_rps) == (2.4, 2.16)
    assert variant.served_capacity.saturated_minutes == 40
    assert variant.current_min_capacity == 4
    expected = (
        "instances served 2.4/s with a queue, against 4 configured: planning with 2.16; measure and set "
        "capacity_rps_per_instance (and InvocationsPerInstanceTarget) for the model now serving"
    )
    [record] = [r for r in audit.records if r.action == "served rate ep/primary"]
    assert (record.outcome, record.reason) == ("skipped", expected)
    assert notifier.sent == [("[prescale] instances serve fewer requests than configured on ep/primary", expected)]
    assert deps.history.load_calls == [(NOW - timedelta(days=14), NOW)]


@pytest.mark.parametrize(
    ("loads", "why"),
    [
        (queued_minutes(2.4, 29), "29 minutes with a queue in 14 days, 30 needed: configured"),
        (queued_minutes(2.4, 40, queue=1.5), "0 minutes with a queue in 14 days, 30 needed: configured"),
        (queued_minutes(3.7, 40), "instances served 3.7/s with a queue: the configured rate holds"),
    ],
    ids=["too-few-minutes", "queue-too-short", "within-10-percent"],
)
def test_the_configured_rate_holds_without_enough_evidence_against_it(loads: list[MinuteLoad], why: str) -> None:
    config, deps, audit, notifier = over_cap_deps()
    deps.history = FakeHistory(flat(8.0), loads=loads)

    plan = reconcile(config, deps, now=NOW, trigger="schedule", dry_run=False)

    [variant] = plan.variants
    assert variant.served_capacity is not None
    assert (variant.served_capacity.used_rps, variant.served_capacity.why) == (4.0, why)
    assert variant.current_min_capacity == 2
    assert not [r for r in audit.records if r.action.startswith("served rate")]
    assert notifier.sent == []


def test_the_latest_thirty_minutes_with_a_queue_decide_and_they_are_kept_for_two_weeks() -> None:
    # Forty queued minutes at 2.4/s twelve days ago (a slow model, the plan lowered since and nothing queued after
    # that) still hold; thirty at 3.8/s since (a faster model promoted) outvote them.
    config, deps, _, _ = over_cap_deps()
    slow = [replace(m, at=m.at - timedelta(days=12)) for m in queued_minutes(2.4, 40)]
    deps.history = FakeHistory(flat(8.0), loads=slow)

    [kept] = reconcile(config, deps, now=NOW, trigger="schedule", dry_run=True).variants

    deps.history = FakeHistory(flat(8.0), loads=slow + queued_minutes(3.8, 30))
    [faster] = reconcile(config, deps, now=NOW, trigger="schedule", dry_run=True).variants

    assert kept.served_capacity is not None and kept.served_capacity.used_rps == 2.16
    assert faster.served_capacity is not None
    assert (faster.served_capacity.served_rps, faster.served_capacity.used_rps) == (3.8, 4.0)
    assert faster.served_capacity.saturated_minutes == 70


def test_a_stuck_engine_never_plans_with_less_than_half_the_configured_rate() -> None:
    plan = reconcile(
        CONFIG,
        PrescaleDeps(
            autoscaling=MemoryAutoScaling(ScalableTarget(min_capacity=2, max_capacity=12)),
            calendar=NoRows(),
            audit=MemoryAudit(),
            kill_switch=Released(),
            history=FakeHistory(flat(8.0), loads=queued_minutes(0.3, 60, queue=40.0)),
        ),
        now=NOW,
        trigger="schedule",
        dry_run=True,
    )

    [variant] = plan.variants
    assert variant.served_capacity is not None
    assert (variant.served_capacity.served_rps, variant.served_capacity.used_rps) == (0.3, 2.0)
    assert variant.current_min_capacity == 4  # 8 / 2


def test_a_rate_that_cannot_be_read_keeps_the_configured_one_and_says_so() -> None:
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "not allowed"}}, "GetMetricData")
    config, deps, _, _ = over_cap_deps()
    deps.history = FakeHistory(flat(8.0), error=denied)

    plan = reconcile(config, deps, now=NOW, trigger="schedule", dry_run=True)

    [variant] = plan.variants
    assert variant.served_capacity is not None
    assert variant.served_capacity.used_rps == 4.0
    assert variant.served_capacity.why.startswith("could not read InvocationsPerInstance and QueueDepth (")
