"""The report's figures on hand-built minutes: what a spike waited for, and a judged week without its history."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fleetsim.fleet import FleetParams, Minute
from fleetsim.report import load_vs_before, spike_first_requests_s, summarize, table, vs_oracle
from fleetsim.traffic import Trace, Window

T0 = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)
PARAMS = FleetParams(capacity_rps_per_instance=4.0)


def _minutes(desired: list[int], serving: list[int] | None = None, failed: int = 0) -> list[Minute]:
    serving = serving or [4] * len(desired)
    return [
        Minute(T0 + timedelta(minutes=i), 100, 100 - failed, failed, 0.0, 0.0, s, max(d, s), d, 2)
        for i, (d, s) in enumerate(zip(desired, serving, strict=True))
    ]


def _spike(start: datetime, minutes: int = 10) -> Window:
    return Window("spike", start, start + timedelta(minutes=minutes), 3.0, predicted=False)


def _trace(minutes: int, *windows: Window) -> Trace:
    return Trace(T0, (100,) * minutes, windows)


def test_a_spike_waits_for_the_first_minute_that_asks_for_more_not_for_the_instances() -> None:
    # The spike starts in minute 2 (desired 4); minute 4 asks for 5; the instance serves from minute 10.
    minutes = _minutes([4, 4, 4, 4, 5, 6, 6, 6, 6, 6, 6, 6], serving=[4] * 10 + [5, 6])
    summary = summarize(minutes, _trace(12, _spike(T0 + timedelta(minutes=2))), PARAMS, None)
    assert summary.spike_to_first_capacity_request_s == 120.0
    assert summary.spike_to_capacity_s == 480.0
    # Started half-way through minute 2: the request is still minute 4's, 90 s after the start.
    late = summarize(minutes, _trace(12, _spike(T0 + timedelta(minutes=2, seconds=30))), PARAMS, None)
    assert late.spike_to_first_capacity_request_s == 90.0


def test_a_spike_the_fleet_absorbs_at_first_is_timed_from_its_first_minute_short_as_well() -> None:
    # The spike starts in minute 2; the fleet serves it until minute 3 leaves requests queued; minute 4 asks.
    queued = [0.0, 0.0, 0.0, 40.0, 80.0, 0.0, 0.0, 0.0]
    minutes = [replace(m, queued=q) for m, q in zip(_minutes([4, 4, 4, 4, 6, 6, 6, 6]), queued, strict=True)]
    summary = summarize(minutes, _trace(8, _spike(T0 + timedelta(minutes=2))), PARAMS, None)
    assert summary.spike_to_first_capacity_request_s == 120.0
    assert summary.shortfall_to_first_capacity_request_s == 60.0
    never_short = summarize(_minutes([4] * 8), _trace(8, _spike(T0 + timedelta(minutes=2))), PARAMS, None)
    assert never_short.shortfall_to_first_capacity_request_s == 0.0


def test_the_slowest_spike_counts_and_no_spike_or_no_request_is_none() -> None:
    minutes = _minutes([4, 5, 5, 5, 5, 5, 5, 7] + [7] * 40)
    two = _trace(48, _spike(T0), _spike(T0 + timedelta(minutes=3)))  # asked at once, then only 4 minutes later
    assert summarize(minutes, two, PARAMS, None).spike_to_first_capacity_request_s == 240.0
    assert summarize(minutes, _trace(48), PARAMS, None).spike_to_first_capacity_request_s is None
    never = _trace(48, _spike(T0 + timedelta(minutes=8), minutes=5))  # nothing asked within it and 30 min after
    assert summarize(minutes, never, PARAMS, None).spike_to_first_capacity_request_s is None


def test_each_spike_gets_its_own_delay_and_one_without_a_request_gets_none() -> None:
    minutes = _minutes([4, 5, 5, 5, 5, 5, 5, 7] + [7] * 40)
    first, second, never = _spike(T0), _spike(T0 + timedelta(minutes=3)), _spike(T0 + timedelta(minutes=8), 5)
    gone = _spike(T0 + timedelta(hours=5))  # no minutes of it were played: left out
    found = spike_first_requests_s(minutes, [first, second, never, gone])
    assert found == [(first, 60.0), (second, 240.0), (never, None)]


def test_a_spike_onset_is_its_first_minutes_load_per_instance_over_the_busiest_of_the_minutes_before() -> None:
    arrived = [100, 160, 120, 200, 150]  # per minute; minute 3 on 5 instances, the others on 4
    serving = [4, 4, 4, 5, 4]
    minutes = [replace(m, arrived=a) for m, a in zip(_minutes([4] * 5, serving=serving), arrived, strict=True)]
    assert load_vs_before(minutes, 3) == pytest.approx((200 / 5) / (160 / 4))  # 1.0: no busier than minute 1
    assert load_vs_before(minutes, 4) == pytest.approx((150 / 4) / (160 / 4))
    assert load_vs_before(minutes, 4, lookback=1) == pytest.approx((150 / 4) / (200 / 5))
    assert load_vs_before(minutes, 0) is None  # nothing before it to compare with
    silent = [replace(m, arrived=0) for m in minutes[:2]] + minutes[2:]
    assert load_vs_before(silent, 2, lookback=2) is None


def test_since_judges_only_the_minutes_from_then_on() -> None:
    since = T0 + timedelta(minutes=5)
    event = Window("friday-simulpub", T0, T0 + timedelta(minutes=10), 2.5, predicted=True)
    minutes = _minutes([4] * 10, failed=1)
    whole = summarize(minutes, _trace(10, event), PARAMS, 1.0)
    week = summarize(minutes, _trace(10, event), PARAMS, 1.0, since=since)
    assert (whole.requests, whole.failed_on_calendar_events) == (1000, 10)
    assert (week.requests, week.failed_on_calendar_events, week.instance_hours) == (500, 5, round(5 * 4 / 60, 2))


def test_hours_against_the_oracle_in_the_table() -> None:
    trace = _trace(60)
    runs = {"project": _minutes([6] * 60, serving=[6] * 60), "oracle": _minutes([4] * 60)}  # whole hours
    summaries = {name: summarize(minutes, trace, PARAMS, None) for name, minutes in runs.items()}
    assert vs_oracle(summaries, "project") == pytest.approx(1.5)
    assert vs_oracle({"project": summaries["project"]}, "project") is None
    lines = table(summaries).splitlines()
    assert "spike->ask" in lines[0]
    assert lines[2].split()[-1] == "x1.500"
