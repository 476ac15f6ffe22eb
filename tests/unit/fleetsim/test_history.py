"""The simulated CloudWatch never lets a simulated decision see the future."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fleetops.prescale.forecast import DemandSeries
from fleetsim.fleet import Minute
from fleetsim.history import FutureReadError, SimulatedHistory
from fleetsim.policies import CalendarPrescale
from fleetsim.simulate import load_setup, run_policies
from fleetsim.traffic import Trace

START = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
JUDGED = START + timedelta(days=21)


def _trace(future_rpm: int) -> Trace:
    """Three weeks at 600 requests a minute, then a judged day at ``future_rpm``."""
    return Trace(START, (600,) * (21 * 1440) + (future_rpm,) * 1440)


def test_asking_past_the_simulated_now_is_refused() -> None:
    history = SimulatedHistory(_trace(600))
    history.now = JUDGED
    with pytest.raises(FutureReadError, match="asked for at 2026-11-23T00:00:00"):
        history.invocations("e", "v", JUDGED - timedelta(days=1), JUDGED + timedelta(minutes=5))


def test_only_whole_slots_that_ended_by_now_are_returned() -> None:
    history = SimulatedHistory(_trace(600))
    history.now = JUDGED + timedelta(minutes=7)  # the 00:05 slot is still running
    series = history.invocations("e", "v", JUDGED - timedelta(minutes=10), history.now)
    assert (series.start, series.rps) == (JUDGED - timedelta(minutes=10), (10.0, 10.0, 600 / 60))
    assert history.latest_read == JUDGED + timedelta(minutes=5)


def _minute(at: datetime, arrived: int, serving: int, queued: float) -> Minute:
    return Minute(at, arrived, arrived, 0, queued, 0.0, serving, serving, serving, serving)


def test_the_instances_minutes_are_read_as_cloudwatch_holds_them_and_never_ahead() -> None:
    # InvocationsPerInstance per second and QueueDepth per instance, for the minutes played so far that had a queue
    # or were next to one.
    history = SimulatedHistory(_trace(600))
    for i, queued in enumerate((0.0, 12.0, 30.0)):
        history.record(_minute(JUDGED + timedelta(minutes=i), 720, 4, queued))
    history.now = JUDGED + timedelta(minutes=3)

    loads = history.minute_loads("e", "v", JUDGED, history.now)

    assert [(m.at, m.invocations_per_instance_rps, m.queue_per_instance) for m in loads] == [
        (JUDGED, 3.0, 0.0),  # kept as the neighbour of the first minute with a queue
        (JUDGED + timedelta(minutes=1), 3.0, 3.0),
        (JUDGED + timedelta(minutes=2), 3.0, 7.5),
    ]
    with pytest.raises(FutureReadError, match="minute loads to 2026-11-23T00:04:00"):
        history.minute_loads("e", "v", JUDGED, history.now + timedelta(minutes=1))


def test_instances_that_serve_less_than_fleet_yaml_says_are_found_out_as_the_day_is_played() -> None:
    # fleet.yaml rates an instance at 4/s; this world's serve 2.8 (a model with longer answers). The judged day
    # runs at 10/s, like its history: the plan's 3 instances hold 8.4, so requests queue until the reconciler,
    # reading only the minutes played so far, plans with what the instances served.
    setup = load_setup("manga-chat-prod")
    world = replace(setup, params=replace(setup.params, capacity_rps_per_instance=2.8, request_seconds=3 / 0.7))
    runs = run_policies(_trace(600), world, seed=1, policies=("project",), judge_from=JUDGED)

    policy = runs["project"].policy
    assert policy is not None
    [prescale] = [p for p in policy.parts if isinstance(p, CalendarPrescale)]
    assert prescale.last_plan is not None
    [variant] = prescale.last_plan.variants
    assert variant.served_capacity is not None and variant.served_capacity.lowered
    assert variant.served_capacity.served_rps is not None
    assert 2.8 <= variant.served_capacity.served_rps < 3.6  # every arrival counts while the queue grows
    assert runs["project"].minutes[0].min_capacity == 3
    assert runs["project"].minutes[-1].min_capacity >= 4  # 10 / (0.9 x served)


class Recording(SimulatedHistory):
    """Remembers, for every read the reconciler makes, the simulated now and the newest slot it got."""

    def __init__(self, trace: Trace) -> None:
        super().__init__(trace)
        self.reads: list[tuple[datetime, DemandSeries]] = []

    def invocations(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> DemandSeries:
        series = super().invocations(endpoint_name, variant_name, start, end)
        self.reads.append((self.now, series))
        return series


def test_the_project_plans_a_judged_day_without_ever_reading_it_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    # The judged day brings 100x the history's traffic. Had the reconciler seen it ahead, its first plan would
    # forecast it; it must learn of it only minute by minute, as the day is played.
    recorders: list[Recording] = []

    def recording(trace: Trace) -> Recording:
        recorders.append(Recording(trace))
        return recorders[-1]

    monkeypatch.setattr("fleetsim.simulate.SimulatedHistory", recording)
    runs = run_policies(_trace(60_000), load_setup("manga-chat-prod"), seed=1, policies=("project",), judge_from=JUDGED)

    [history] = recorders
    assert len(history.reads) == 96  # every 15 minutes of the day
    for now, series in history.reads:
        held = [i for i, v in enumerate(series.rps) if v is not None]
        assert series.start + (held[-1] + 1) * (series.end - series.start) / len(series.rps) <= now
    first_read = history.reads[0][1]
    assert max(v for v in first_read.rps if v is not None) == 10.0  # 600 a minute: none of the judged day
    assert runs["project"].minutes[-1].min_capacity > 2  # the fleet reacted as the day was played


def test_a_trace_played_without_history_is_planned_as_a_new_endpoint_quieter_than_its_configuration() -> None:
    # Two days at 3 requests/s, a quarter of the configured 12 (4 instances at headroom 1.25), with no history
    # before them: the reconciler reads what has been played so far, too little to forecast from, and plans the
    # configured levels lowered by today's level (at least half: 12 x 0.5 x 1.25 / 4 = 1.9 -> the floor, 2).
    setup = load_setup("manga-chat-prod")
    setup = setup.tuned(prescale={"lead_time_minutes": 20})
    start = datetime(2026, 12, 1, 15, tzinfo=UTC)  # Wednesday 00:00 in Tokyo: no calendar event for two days
    runs = run_policies(Trace(start, (180,) * (2 * 1440)), setup, seed=1, policies=("project",))

    policy = runs["project"].policy
    assert policy is not None
    [prescale] = [p for p in policy.parts if isinstance(p, CalendarPrescale)]
    assert prescale.last_plan is not None
    [variant] = prescale.last_plan.variants
    assert variant.forecast is not None
    assert (variant.forecast.source, variant.forecast.level_ratio) == ("configuration", 0.5)
    assert variant.forecast.why.endswith("days of Invocations history, 7 needed: configured levels")
    minutes = runs["project"].minutes
    assert minutes[0].min_capacity == 4  # the first run has no two hours to read yet
    later = [m.min_capacity for m in minutes[3 * 60 :]]
    # 2 but for a while after each night: the two hours read then were mostly the x0.4 off-peak window, against
    # which 3 requests/s are 0.625 of the configured level (12 x 0.625 x 1.25 / 4 = 2.3 -> 3).
    assert set(later) == {2, 3} and later.count(2) > 0.8 * len(later)
