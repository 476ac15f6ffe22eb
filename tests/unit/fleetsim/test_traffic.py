"""Traffic from the calendar and from an operator's CSV export."""

from __future__ import annotations

import statistics
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from fleetsim import scenarios
from fleetsim.simulate import Setup, load_setup
from fleetsim.traffic import Spike, Trace, TraceError, generate, load_csv, write_csv

JST = ZoneInfo("Asia/Tokyo")
FRIDAY = datetime(2026, 12, 4, tzinfo=JST)


def _week(seed: int, spikes: tuple[Spike, ...] = ()) -> tuple[Setup, Trace]:
    setup = load_setup("manga-chat-prod")
    entries, _ = setup.calendar()
    return setup, generate(
        setup.variant, entries, setup.endpoint.name, FRIDAY, FRIDAY + timedelta(days=1), seed=seed, spikes=spikes
    )


def _rps(trace: Trace, start: datetime, minutes: int) -> float:
    first = int((start - trace.start).total_seconds() // 60)
    return statistics.mean(trace.requests[first : first + minutes]) / 60


def test_a_seed_always_gives_the_same_trace_and_another_seed_another() -> None:
    assert _week(1)[1] == _week(1)[1]
    assert _week(1)[1].requests != _week(2)[1].requests


def test_the_calendar_shapes_the_day_around_the_baseline() -> None:
    setup, trace = _week(5)
    baseline = setup.variant.baseline_rps
    # Friday simulpub 20:00-22:00 JST x2.5: full height after the 10-minute ramp, before the last third fades.
    assert _rps(trace, FRIDAY.replace(hour=20, minute=15), 20) == pytest.approx(2.5 * baseline, rel=0.06)
    assert _rps(trace, FRIDAY.replace(hour=20, minute=0), 2) < 1.5 * baseline  # still ramping
    # The night (01:00-08:00 JST x0.4) and an ordinary afternoon.
    assert _rps(trace, FRIDAY.replace(hour=3), 60) == pytest.approx(0.4 * baseline, rel=0.06)
    assert _rps(trace, FRIDAY.replace(hour=14), 60) == pytest.approx(baseline, rel=0.06)
    assert [(w.name, w.predicted) for w in trace.windows] == [("friday-simulpub", True)]


def test_an_unpredicted_spike_raises_traffic_and_is_marked_as_not_in_the_calendar() -> None:
    spike = Spike(FRIDAY.replace(hour=13), minutes=60, multiplier=2.0)
    setup, trace = _week(5, (spike,))
    assert _rps(trace, FRIDAY.replace(hour=13, minute=15), 20) == pytest.approx(
        2 * setup.variant.baseline_rps, rel=0.06
    )
    unpredicted = [w for w in trace.windows if not w.predicted]
    assert [(w.start, w.end) for w in unpredicted] == [
        (datetime(2026, 12, 4, 4, 0, tzinfo=UTC), datetime(2026, 12, 4, 5, 0, tzinfo=UTC))
    ]


def test_a_cloudwatch_export_is_replayed_minute_by_minute(tmp_path: Path) -> None:
    export = tmp_path / "invocations.csv"
    export.write_text(
        "Timestamp,Invocations\n2026-12-04T11:00:00Z,600\n2026-12-04T11:05:00Z,1502\n2026-12-04 11:10:00,0\n"
    )
    trace = load_csv(export)
    assert trace.start == datetime(2026, 12, 4, 11, 0, tzinfo=UTC)
    # 5-minute sums spread evenly over their minutes; the remainder goes to the first minutes.
    assert trace.requests == (120,) * 5 + (301, 301, 300, 300, 300) + (0,) * 5


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("time,requests\n2026-12-04T11:00:00Z,10\nyesterday,10\n", "trace.csv:3: cannot read the time 'yesterday'"),
        ("2026-12-04T11:00:00Z,10\n2026-12-04T11:01:00Z,-4\n", "trace.csv:2: the request count '-4' must be"),
        ("2026-12-04T11:00:00Z,10\n2026-12-04T11:01:00Z,lots\n", "trace.csv:2: the request count 'lots' is not"),
        (
            "2026-12-04T11:00:00Z,10\n2026-12-04T11:01:00Z,10\n2026-12-04T11:03:00Z,10\n",
            "trace.csv:3: 2026-12-04T11:03:00+00:00 is 120 s after the previous row, expected 60 s (fill missing",
        ),
        ("2026-12-04T11:00:00Z,10\n2026-12-04T11:00:30Z,10\n", "trace.csv:2: rows are 30 s apart; use whole minutes"),
        ("2026-12-04T11:00:00Z\n", "trace.csv:1: expected 'time,requests'"),
        ("time,requests\n2026-12-04T11:00:00Z,10\n", "needs at least two rows"),
    ],
)
def test_a_bad_trace_file_names_the_line_and_the_reason(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(content)
    with pytest.raises(TraceError) as caught:
        load_csv(path)
    assert says in str(caught.value)


def test_a_missing_trace_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"cannot read trace .*nowhere\.csv"):
        load_csv(tmp_path / "nowhere.csv")


def test_weeks_of_five_minute_rows_are_read_minute_by_minute(tmp_path: Path) -> None:
    start = datetime(2026, 11, 9, tzinfo=UTC)
    rows = [f"{start + timedelta(minutes=5 * i):%Y-%m-%dT%H:%M:%SZ},{600 + i % 288}" for i in range(3 * 7 * 288)]
    export = tmp_path / "three-weeks.csv"
    export.write_text("Timestamp,Invocations\n" + "\n".join(rows) + "\n")
    trace = load_csv(export)
    assert (trace.start, len(trace), trace.end) == (start, 3 * 7 * 24 * 60, start + timedelta(weeks=3))
    assert sum(trace.requests) == sum(600 + i % 288 for i in range(3 * 7 * 288))
    assert trace.requests[-5:] == (178, 178, 177, 177, 177)  # the last row, 887, spread over its minutes


def test_a_written_trace_replays_as_it_was_played(tmp_path: Path) -> None:
    setup = load_setup("manga-chat-prod")
    entries, _ = setup.calendar()
    weeks = scenarios.generate(replace(scenarios.scenario("baseline-1x"), weeks=3), setup.variant, entries, "x")
    assert len(weeks) == 3 * 7 * 24 * 60
    replayed = load_csv(write_csv(weeks, tmp_path / "weeks.csv"))
    assert (replayed.start, replayed.requests) == (weeks.start, weeks.requests)
    five = load_csv(write_csv(weeks, tmp_path / "five.csv", minutes_per_row=5))
    assert len(five) == len(weeks) and sum(five.requests) == sum(weeks.requests)
    assert sum(five.requests[:5]) == sum(weeks.requests[:5])
    with pytest.raises(ValueError, match="do not make whole rows of 11 minutes"):
        write_csv(weeks, tmp_path / "eleven.csv", minutes_per_row=11)
