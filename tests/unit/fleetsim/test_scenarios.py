"""Scenarios: worlds the policy did not plan from, with the shapes, sizes and timing they say they have."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from fleetops.calendar import CalendarEntry
from fleetsim.scenarios import (
    SCENARIOS,
    WEEK,
    EventTruth,
    Scenario,
    daily_profile,
    expected_rps,
    generate,
    scenario,
    setup_for,
)
from fleetsim.simulate import Setup, load_setup
from fleetsim.traffic import Spike, Trace

JST = ZoneInfo("Asia/Tokyo")
PACIFIC = ZoneInfo("America/Los_Angeles")
JUDGED_MONDAY = datetime(2026, 11, 30, tzinfo=JST)
JUDGED_FRIDAY = datetime(2026, 12, 4, tzinfo=JST)


@cache
def _setup() -> tuple[Setup, tuple[CalendarEntry, ...]]:
    setup = load_setup("manga-chat-prod")
    return setup, tuple(setup.calendar()[0])


def _trace(world: Scenario) -> Trace:
    setup, entries = _setup()
    return generate(world, setup.variant, entries, setup.endpoint.name)


def _expected(world: Scenario) -> np.ndarray:
    setup, entries = _setup()
    return expected_rps(world, setup.variant, entries, setup.endpoint.name)


def _tick(world: Scenario, at: datetime) -> int:
    return int((at - world.start) / timedelta(minutes=1))


def _rps(trace: Trace, start: datetime, minutes: int) -> float:
    first = int((start - trace.start) / timedelta(minutes=1))
    return statistics.mean(trace.requests[first : first + minutes]) / 60


def _reference(world: Scenario, at: datetime) -> float:
    """The level events are sized against: the configured baseline x the factor x the trend at ``at``."""
    weeks = (at - world.judged_from) / WEEK
    return float(_setup()[0].variant.baseline_rps * world.baseline_factor * (1 + world.growth_per_week) ** weeks)


def test_the_scenarios_the_bench_judges() -> None:
    names = {s.name for s in SCENARIOS}
    required = {"baseline-0.5x", "baseline-1x", "baseline-2x", "event-early-30pct", "entry-brings-nothing"}
    assert required | {"unannounced-3x"} <= names
    assert all(s.weeks == 4 and s.judged_from == JUDGED_MONDAY for s in SCENARIOS)
    assert {s.zone for s in SCENARIOS} >= {"Asia/Tokyo", "America/Los_Angeles"}  # nothing tuned to one zone
    with pytest.raises(KeyError, match=r"unknown scenario 'nope'; known: baseline-0\.5x"):
        scenario("nope")


def test_a_seed_always_gives_the_same_trace_and_another_seed_another() -> None:
    world = scenario("baseline-1x")
    assert _trace(world) == _trace(world)
    assert _trace(world).requests != _trace(replace(world, seed=world.seed + 1)).requests


def test_four_weeks_of_minutes_with_the_judged_weeks_events_as_the_calendar_states_them() -> None:
    world = scenario("baseline-1x")
    trace = _trace(world)
    assert len(trace) == 4 * 7 * 24 * 60 and trace.start == world.start
    assert [(w.name, w.start.astimezone(JST), w.end - w.start, w.multiplier, w.predicted) for w in trace.windows] == [
        ("shonen-jump-monday", JUDGED_MONDAY.replace(hour=18), timedelta(hours=3), 2.0, True),
        ("friday-simulpub", JUDGED_FRIDAY.replace(hour=20), timedelta(hours=2), 2.5, True),
        # Saturday 10:00 in Los Angeles is Sunday 03:00 in Tokyo.
        ("us-saturday-manga-club", datetime(2026, 12, 6, 3, tzinfo=JST), timedelta(hours=2), 1.5, True),
    ]


def test_the_day_has_two_humps_and_a_night_trough_in_the_scenarios_zone() -> None:
    for weekend in (False, True):
        profile = daily_profile(scenario("baseline-1x"), weekend=weekend)
        peaks = [
            m for m in range(len(profile)) if profile[m] > profile[m - 1] and profile[m] >= profile[(m + 1) % 1440]
        ]
        assert len(peaks) == 2
        assert profile.mean() == pytest.approx(1.0)
    weekday = daily_profile(scenario("baseline-1x"))
    assert [m / 60 for m in np.argsort(weekday)[-1:]] == [21.5]
    assert weekday[5 * 60] < 0.5 and weekday[12 * 60 + 30] > 1.5  # the night, lunch
    # us-pacific-1x: the judged Tuesday's busiest minute is 20:00 in Los Angeles (04:00 UTC), not in Tokyo.
    world = scenario("us-pacific-1x")
    tuesday = datetime(2026, 12, 1, tzinfo=PACIFIC)
    day = _expected(world)[_tick(world, tuesday) : _tick(world, tuesday + timedelta(days=1))]
    busiest = tuesday + timedelta(minutes=int(np.argmax(day)))
    assert (busiest.hour, busiest.astimezone(UTC).hour) == (20, 4)


def test_the_baseline_factor_scales_the_mean() -> None:
    world = scenario("baseline-1x")
    double = replace(world, baseline_factor=2.0)
    assert np.allclose(_expected(double), 2 * _expected(world))
    assert statistics.mean(_trace(double).requests) / statistics.mean(_trace(world).requests) == pytest.approx(
        2, rel=0.01
    )
    # A judged Tuesday (no event in Tokyo) averages the configured baseline x the factor x the trend.
    for factor in (0.5, 1.0, 2.0):
        tuesday = datetime(2026, 12, 1, tzinfo=JST)
        scaled = replace(world, baseline_factor=factor)
        mean = _rps(_trace(scaled), tuesday, 24 * 60)
        assert mean == pytest.approx(_reference(scaled, tuesday + timedelta(hours=12)), rel=0.01)


def test_the_trend_makes_the_judged_week_busier_than_the_first() -> None:
    world = scenario("baseline-1x")
    trace = _trace(world)
    weeks = [statistics.mean(trace.requests[w * 10080 : (w + 1) * 10080]) for w in range(4)]
    assert weeks == sorted(weeks)
    assert weeks[3] / weeks[0] == pytest.approx(1.05**3, rel=0.02)


def test_the_early_event_is_thirty_percent_above_its_entry_and_rises_ten_minutes_before_it() -> None:
    world = scenario("event-early-30pct")
    trace = _trace(world)
    start = JUDGED_FRIDAY.replace(hour=20)
    peak = _rps(trace, start, 60)  # held from 19:55 to 21:10
    assert peak == pytest.approx(1.3 * 2.5 * _reference(world, start), rel=0.03)
    quiet = replace(world, events=(EventTruth("friday-simulpub", absent=True),))
    expected, without = _expected(world), _expected(quiet)
    for week in range(4):  # in the history weeks too, each within 10 % of the truth
        at = _tick(world, start - (3 - week) * WEEK)
        assert np.array_equal(expected[at - 30 : at - 10], without[at - 30 : at - 10])  # nothing before 19:50
        assert (expected[at - 9 : at] > without[at - 9 : at]).all()  # rising from 19:50 ...
        assert expected[at - 5] > 1.5 * without[at - 5]  # ... at the peak from 19:55
        size = expected[at + 10] / _reference(world, start - (3 - week) * WEEK + timedelta(minutes=10)) / 2.5
        assert 1.3 * 0.9 <= size <= 1.3 * 1.1
        assert size == pytest.approx(1.3) if week == 3 else size != pytest.approx(1.3, abs=1e-6)
    window = next(w for w in trace.windows if w.name == "friday-simulpub")
    assert (window.start, window.end) == (start - timedelta(minutes=10), start + timedelta(hours=2))  # widened


def test_an_entry_that_brings_nothing_leaves_its_window_at_the_days_own_level() -> None:
    start = JUDGED_MONDAY.replace(hour=18)
    profile = daily_profile(scenario("entry-brings-nothing"))[18 * 60 : 21 * 60]
    for name, ratio in (("entry-brings-nothing", 1.0), ("baseline-1x", 1.15)):
        world = scenario(name)
        trace = _trace(world)
        for week in range(4):
            monday = start - (3 - week) * WEEK
            level = _reference(world, monday) * float(profile.mean())
            if ratio == 1.0:
                assert _rps(trace, monday, 180) == pytest.approx(level, rel=0.02)
            else:  # the same window where the entry does bring its traffic
                assert _rps(trace, monday, 180) > ratio * level
    assert "shonen-jump-monday" in {w.name for w in _trace(scenario("entry-brings-nothing")).windows}


def test_an_unannounced_spike_is_in_no_calendar_and_triples_the_level() -> None:
    world = scenario("unannounced-3x")
    trace = _trace(world)
    start = datetime(2026, 12, 2, 16, tzinfo=JST)
    spikes = {w.name: w for w in trace.windows if not w.predicted}
    assert sorted(spikes) == ["unannounced 3x", "unannounced 3x at night", "unannounced 3x in the evening"]
    spike = spikes["unannounced 3x"]
    assert (spike.start, spike.end - spike.start, spike.multiplier) == (start, timedelta(minutes=80), 3.0)
    assert _rps(trace, start + timedelta(minutes=5), 55) == pytest.approx(3 * _reference(world, start), rel=0.03)
    assert _rps(trace, start - timedelta(hours=1), 50) < 1.5 * _reference(world, start)
    assert all(w.predicted for w in _trace(scenario("baseline-1x")).windows)


def test_a_quiet_day_lowers_only_that_days_everyday_traffic_and_leaves_its_events() -> None:
    world = scenario("baseline-1x")
    holiday = replace(world, quiet_days=((0, 0.5),))  # the judged Monday, which has the Shonen Jump drop
    usual, quiet = _expected(world), _expected(holiday)
    monday, tuesday = _tick(world, JUDGED_MONDAY), _tick(world, JUDGED_MONDAY + timedelta(days=1))
    assert np.allclose(quiet[:monday], usual[:monday]) and np.allclose(quiet[tuesday:], usual[tuesday:])
    noon = _tick(world, JUDGED_MONDAY.replace(hour=12))
    assert quiet[noon] == pytest.approx(0.5 * usual[noon])
    # 19:00, inside the drop (18:00-21:00 at x2): the event raises the quiet day to its usual peak.
    drop = _tick(world, JUDGED_MONDAY.replace(hour=19))
    assert quiet[drop] == pytest.approx(usual[drop], rel=0.02) and quiet[drop] > 1.5 * _reference(world, JUDGED_MONDAY)


def test_a_wandering_level_moves_hour_by_hour_and_leaves_the_other_scenarios_draws_alone() -> None:
    world = scenario("baseline-1x")
    walking = replace(world, level_walk=0.12)
    ratio = _expected(walking) / _expected(world)
    hourly = ratio.reshape(-1, 60)
    steady = np.all(np.isclose(hourly, hourly[:, :1]), axis=1)  # one level per hour, but where an event lifts
    assert steady.mean() > 0.8  # the traffic towards its own peak and decays after it (sized on the usual level)
    logs = np.log(hourly[:, 0])
    assert 0.15 < logs.std() < 0.35  # 0.12 / sqrt(1 - 0.85 ** 2) = 0.23 at a stationary wander
    assert np.corrcoef(logs[:-1], logs[1:])[0, 1] > 0.7  # an hour is much like the one before it
    assert _trace(replace(walking, level_walk=0.0)) == _trace(world)


def test_a_level_step_scales_everything_from_its_day_on_events_included() -> None:
    world = scenario("baseline-1x")
    stepped = replace(world, level_step=(-1.0, 1.8))  # from the Sunday before the judged week, 00:00 JST
    usual, busy = _expected(world), _expected(stepped)
    step = _tick(world, JUDGED_MONDAY - timedelta(days=1))
    assert np.allclose(busy[:step], usual[:step])
    assert np.allclose(busy[step:], 1.8 * usual[step:])  # the Monday drop too: it is sized on the level


def test_humps_that_moved_come_later_from_their_day_on_and_the_history_keeps_the_old_shape() -> None:
    world = scenario("baseline-1x")
    moved = replace(world, humps_moved=(-2.0, 3.0))  # from the Saturday before the judged week, 00:00 JST
    usual, later = _expected(world), _expected(moved)
    change = _tick(world, JUDGED_MONDAY - timedelta(days=2))
    assert np.allclose(later[:change], usual[:change])
    wednesday = _tick(world, JUDGED_MONDAY + timedelta(days=2))
    usual_day, later_day = usual[wednesday : wednesday + 1440], later[wednesday : wednesday + 1440]
    assert (int(np.argmax(later_day)) - int(np.argmax(usual_day))) % 1440 == 180  # 21:30 -> 00:30
    assert later_day.mean() == pytest.approx(usual_day.mean(), rel=0.01)  # the same day's traffic, moved
    assert _trace(replace(moved, humps_moved=None)) == _trace(world)


def test_the_operator_of_a_scenario_sets_its_cap_and_the_zone_where_clocks_change() -> None:
    setup, _ = _setup()
    us = setup_for(replace(scenario("us-pacific-1x"), cap=20), setup)
    assert (us.variant.traffic_timezone, us.variant.cap) == ("America/Los_Angeles", 20)
    tokyo = setup_for(scenario("baseline-1x"), setup)  # no daylight saving: UTC reads the same hours
    assert (tokyo.variant.traffic_timezone, tokyo.variant.cap) == ("UTC", setup.variant.cap)


def test_a_world_whose_instances_serve_less_than_configured_leaves_the_operators_figure_alone() -> None:
    setup, _ = _setup()
    slower = setup_for(replace(scenario("baseline-1x"), capacity_factor=0.7), setup)
    assert slower.variant.capacity_rps_per_instance == setup.variant.capacity_rps_per_instance  # what fleet.yaml says
    assert slower.params.capacity_rps_per_instance == pytest.approx(0.7 * setup.variant.capacity_rps_per_instance)
    assert slower.params.request_seconds == pytest.approx(setup.params.request_seconds / 0.7)  # longer answers


def test_a_scenario_is_checked_when_it_is_written() -> None:
    world = scenario("baseline-1x")
    with pytest.raises(ValueError, match="quiet_days are"):
        replace(world, quiet_days=((7, 0.5),))
    with pytest.raises(ValueError, match="level_walk at least 0"):
        replace(world, level_walk=-0.1)
    with pytest.raises(ValueError, match="level_step's factor must be positive"):
        replace(world, level_step=(-1.0, 0.0))
    with pytest.raises(ValueError, match="capacity_factor must be positive"):
        replace(world, capacity_factor=0.0)
    with pytest.raises(ValueError, match="not in the judged week"):
        replace(world, spikes=(Spike(world.start + timedelta(days=1), 60, 3.0),))
    with pytest.raises(ValueError, match="at least one week of history"):
        replace(world, weeks=1)
    with pytest.raises(ValueError, match="size must be positive"):
        EventTruth("friday-simulpub", size=0)


def test_the_world_never_reads_the_policy() -> None:
    setup, entries = _setup()
    world = scenario("event-early-30pct")
    greedy = setup.variant.model_copy(update={"headroom": 3.0})
    assert generate(world, greedy, entries, setup.endpoint.name) == _trace(world)
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, fleetsim.scenarios; print(sorted(m for m in sys.modules if 'prescale' in m))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert imported.stdout.strip() == "[]"
