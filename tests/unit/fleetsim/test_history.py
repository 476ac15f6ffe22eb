"""The simulated CloudWatch never lets a simulated decision see the future."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetops.prescale.forecast import DemandSeries
from fleetsim.history import FutureReadError, SimulatedHistory
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
