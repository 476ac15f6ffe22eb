"""The demand forecast and learned event sizes, on small series computed by hand.

A series is requests/s per 5-minute slot (``SLOT``) from a slot-aligned UTC start.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from fleetops.calendar import Occurrence
from fleetops.prescale.event_sizes import EARLY, LATE, MAX_OCCURRENCES, EventSize, Profile, learn
from fleetops.prescale.forecast import (
    LEVEL_MEMORY,
    MAX_WEEKLY_GROWTH,
    SLOT,
    SLOTS_PER_WEEK,
    WEEK,
    DemandSeries,
    corrected,
    everyday,
    forecast,
    level_ratio,
    recent_slots,
    weekly_growth,
)

T0 = datetime(2026, 11, 4, tzinfo=UTC)  # a Wednesday, midnight UTC
SLOTS_PER_DAY = 288


def series(*rps: float | None) -> DemandSeries:
    return DemandSeries(T0, tuple(rps))


def weeks(*levels: float) -> DemandSeries:
    """Whole weeks, each flat at its level, oldest first."""
    return DemandSeries(T0, tuple(level for level in levels for _ in range(SLOTS_PER_WEEK)))


# everyday: calendar event windows cut out of the history


def test_a_release_night_in_the_middle_is_replaced_by_a_straight_line_between_its_neighbours() -> None:
    usual = everyday(series(4.0, 50.0, 50.0, 50.0, 8.0), [(T0 + SLOT, T0 + 4 * SLOT)])
    assert usual.rps == (4.0, 5.0, 6.0, 7.0, 8.0)


def test_every_slot_an_event_touches_is_cut_out_even_when_the_event_starts_and_ends_mid_slot() -> None:
    # 10:02 to 10:13 touches the slots of 10:00, 10:05 and 10:10.
    event = (T0 + SLOT + timedelta(minutes=2), T0 + 3 * SLOT + timedelta(minutes=3))
    usual = everyday(series(4.0, 50.0, 50.0, 50.0, 8.0), [event])
    assert usual.rps == (4.0, 5.0, 6.0, 7.0, 8.0)


def test_an_event_at_the_end_of_the_history_holds_the_last_everyday_value() -> None:
    usual = everyday(series(3.0, 5.0, 40.0, 40.0), [(T0 + 2 * SLOT, T0 + 4 * SLOT)])
    assert usual.rps == (3.0, 5.0, 5.0, 5.0)


def test_an_event_at_the_start_of_the_history_holds_the_first_everyday_value() -> None:
    usual = everyday(series(40.0, 40.0, 6.0, 7.0), [(T0 - SLOT, T0 + 2 * SLOT)])
    assert usual.rps == (6.0, 6.0, 6.0, 7.0)


def test_slots_with_nothing_recorded_stay_empty_when_an_event_covers_them() -> None:
    # The endpoint started serving at the third slot; the event covers the first four.
    usual = everyday(series(None, None, 30.0, 30.0, 7.0), [(T0, T0 + 4 * SLOT)])
    assert usual.rps == (None, None, 7.0, 7.0, 7.0)


def test_an_empty_slot_beside_an_event_is_not_used_as_a_neighbour() -> None:
    usual = everyday(series(2.0, None, 50.0, 4.0), [(T0 + 2 * SLOT, T0 + 3 * SLOT)])
    assert usual.rps == (2.0, None, 4.0, 4.0)


# weekly_growth: the week-over-week trend


def test_weeks_growing_ten_percent_each_give_a_growth_of_one_point_one() -> None:
    assert weekly_growth(weeks(10.0, 11.0, 12.1)) == pytest.approx(1.1, abs=1e-12)


def test_a_single_week_of_history_has_no_trend() -> None:
    assert weekly_growth(weeks(10.0)) == 1.0


def test_a_threefold_jump_between_two_weeks_is_clamped_to_the_largest_growth() -> None:
    assert MAX_WEEKLY_GROWTH == 1.5
    assert weekly_growth(weeks(10.0, 30.0)) == 1.5


def test_a_threefold_drop_between_two_weeks_is_clamped_to_the_largest_decline() -> None:
    assert weekly_growth(weeks(30.0, 10.0)) == pytest.approx(1 / 1.5, abs=1e-12)


def test_weeks_are_counted_back_from_the_end_and_a_partial_week_at_the_start_is_left_out() -> None:
    # Half a week at 1 req/s, then whole weeks at 10 and 12: only 12/10 counts.
    half = DemandSeries(T0 - WEEK / 2, (1.0,) * (SLOTS_PER_WEEK // 2) + weeks(10.0, 12.0).rps)
    assert weekly_growth(half) == pytest.approx(1.2, abs=1e-12)


def test_a_week_with_unrecorded_slots_ends_the_trend() -> None:
    # The oldest week has one empty slot: only the two newer weeks (11 -> 12.1) give a ratio.
    rps = list(weeks(5.0, 11.0, 12.1).rps)
    rps[10] = None
    assert weekly_growth(DemandSeries(T0, tuple(rps))) == pytest.approx(1.1, abs=1e-12)


# forecast: the median of the same slot in past weeks


NOW = T0 + 3 * WEEK


def three_weeks_with(oldest: float, middle: float, newest: float, at: timedelta = timedelta(0)) -> DemandSeries:
    """Three weeks at 1 req/s, except the slot at offset ``at`` of each week."""
    rps = [1.0] * (3 * SLOTS_PER_WEEK)
    i = int(at / SLOT)
    rps[i], rps[i + SLOTS_PER_WEEK], rps[i + 2 * SLOTS_PER_WEEK] = oldest, middle, newest
    return DemandSeries(T0, tuple(rps))


def test_one_unannounced_spike_is_outvoted_by_the_other_weeks() -> None:
    history = three_weeks_with(oldest=10.0, middle=12.0, newest=30.0, at=timedelta(hours=18))
    assert forecast(history, NOW, [NOW + timedelta(hours=18)]) == [12.0]


def test_each_past_week_is_grown_once_per_week_back() -> None:
    # 30 x 1.1 = 33, 12 x 1.21 = 14.52, 10 x 1.331 = 13.31: the median is 14.52.
    history = three_weeks_with(oldest=10.0, middle=12.0, newest=30.0, at=timedelta(hours=18))
    assert forecast(history, NOW, [NOW + timedelta(hours=18)], growth=1.1) == [14.52]


def test_with_two_weeks_the_forecast_is_their_mean() -> None:
    history = DemandSeries(T0 + WEEK, three_weeks_with(0.0, 10.0, 12.0).rps[SLOTS_PER_WEEK:])
    assert forecast(history, NOW, [NOW]) == [11.0]


def test_the_slot_still_running_at_now_is_never_read() -> None:
    # At 18:32 the 18:30 slot has not ended: its huge value (a partial datapoint, a future the simulator
    # knows) must not reach the forecast of 18:30 next week. Three weeks hold 8, 9 and 10 there.
    now = NOW + timedelta(hours=18, minutes=32)
    at = timedelta(hours=18, minutes=30)
    rps = list(three_weeks_with(oldest=8.0, middle=9.0, newest=10.0, at=at).rps)
    rps += [1.0] * SLOTS_PER_DAY
    running = int((now - T0) / SLOT)
    assert T0 + running * SLOT == NOW + at
    rps[running] = 1_000_000.0
    history = DemandSeries(T0, tuple(rps))
    # Next week's 18:30 sees weeks 2, 3 and 4 back: 10, 9, 8 (the running slot one week back is skipped).
    assert forecast(history, now, [NOW + WEEK + at]) == [9.0]


def test_the_slot_that_starts_at_now_is_not_read_either() -> None:
    rps = list(three_weeks_with(oldest=8.0, middle=9.0, newest=10.0).rps) + [1_000_000.0] * 4
    history = DemandSeries(T0, tuple(rps))
    assert forecast(history, NOW, [NOW + WEEK]) == [9.0]


def test_a_slot_three_weeks_past_a_one_week_history_is_forecast_from_that_week() -> None:
    # A two-week planning horizon reaches this far: weeks 1 and 2 back have not happened yet, week 3 back has.
    history = DemandSeries(T0, (5.0,) * SLOTS_PER_WEEK)
    assert forecast(history, T0 + WEEK, [T0 + 3 * WEEK]) == [5.0]
    assert forecast(history, T0 + WEEK, [T0 + 3 * WEEK], growth=1.1) == [6.655]  # 5 x 1.1 ** 3


def test_past_weeks_are_read_at_the_same_local_time_across_a_daylight_saving_change() -> None:
    # Los Angeles users busy at 09:00 local only; the clocks went forward on Sunday 2026-03-08. Three weeks of
    # history from Monday 2026-02-23, then Monday 2026-03-16 09:00 PDT (16:00 UTC) is forecast.
    la = ZoneInfo("America/Los_Angeles")
    start = datetime(2026, 2, 23, 8, tzinfo=UTC)  # midnight in Los Angeles
    slots = [start + i * SLOT for i in range(3 * SLOTS_PER_WEEK)]
    history = DemandSeries(start, tuple(10.0 if s.astimezone(la).hour == 9 else 1.0 for s in slots))
    now = start + 3 * WEEK
    nine = datetime(2026, 3, 16, 16, tzinfo=UTC)
    assert forecast(history, now, [nine], zone=la) == [10.0]
    # Read 168 hours back instead, two of the three weeks give their 08:00 (winter time): the busy hour is missed
    # and comes an hour late.
    assert forecast(history, now, [nine]) == [1.0]
    assert forecast(history, now, [nine + timedelta(hours=1)]) == [10.0]


def test_a_slot_no_past_week_holds_has_no_forecast() -> None:
    day = DemandSeries(T0, (5.0,) * SLOTS_PER_DAY)
    now = T0 + timedelta(days=1)
    assert forecast(day, now, [now, now + timedelta(hours=6)]) == [None, None]


def test_a_slot_empty_in_every_past_week_has_no_forecast() -> None:
    rps: list[float | None] = [5.0] * (2 * SLOTS_PER_WEEK)
    rps[3] = rps[3 + SLOTS_PER_WEEK] = None
    history = DemandSeries(T0, tuple(rps))
    now = T0 + 2 * WEEK
    assert forecast(history, now, [now + 3 * SLOT, now + 4 * SLOT]) == [None, 5.0]


# event_sizes.learn: an entry's size from its own past occurrences


EVENT_START = timedelta(days=2, hours=10)  # Fridays 10:00 UTC, 30 minutes
EVENT_LENGTH = timedelta(minutes=30)


def friday(week: int, kind: str = "recurring") -> Occurrence:
    start = T0 + week * WEEK + EVENT_START
    return Occurrence(
        name="simulpub",
        start=start,
        end=start + EVENT_LENGTH,
        multiplier=2.5,
        reason="Friday simulpub",
        timezone="UTC",
        endpoints=(),
        kind=kind,
    )


def fridays_history(peaks: list[float], early: timedelta = timedelta(0)) -> DemandSeries:
    """``len(peaks)`` weeks at 10 req/s; each week's Friday event (from ``early`` before its start) at its peak."""
    rps = [10.0] * (len(peaks) * SLOTS_PER_WEEK)
    for week, peak in enumerate(peaks):
        first = int((week * WEEK + EVENT_START - early) / SLOT)
        last = int((week * WEEK + EVENT_START + EVENT_LENGTH) / SLOT)
        rps[first:last] = [peak] * (last - first)
    return DemandSeries(T0, tuple(rps))


def learn_from(
    history: DemandSeries, past: list[Occurrence], kind: str = "recurring", minimum: int = 2
) -> tuple[EventSize, Profile | None]:
    usual = everyday(history, [(o.start - EARLY, o.end + LATE) for o in past])
    return learn("simulpub", kind, 2.5, past, history, usual, minimum)


def test_an_entry_seen_three_times_at_three_times_everyday_traffic_is_sized_at_three() -> None:
    past = [friday(0), friday(1), friday(2)]
    size, profile = learn_from(fridays_history([30.0, 30.0, 30.0]), past)
    assert (size.configured, size.learned, size.used, size.occurrences) == (2.5, 3.0, "learned", 3)
    assert size.early_minutes == 0
    assert size.why == "peak over everyday demand in the last 3 occurrence(s)"
    # One ratio per slot from an hour before the start to 30 minutes after the end: 12 x 1, 6 x 3, 6 x 1.
    assert profile is not None
    assert profile.ratios == (1.0,) * 12 + (3.0,) * 6 + (1.0,) * 6


def test_the_size_is_the_largest_of_the_occurrences_and_used_for_a_future_occurrence() -> None:
    size, profile = learn_from(fridays_history([20.0, 35.0, 25.0]), [friday(0), friday(1), friday(2)])
    assert size.learned == 3.5
    assert profile is not None
    future = friday(3)
    assert profile.multiplier(future, future.start) == 3.5
    assert profile.multiplier(future, future.start - timedelta(minutes=5)) == 1.0
    assert profile.multiplier(future, future.end + LATE) == 1.0


def test_an_entry_whose_occurrences_brought_no_extra_traffic_is_sized_at_one() -> None:
    size, profile = learn_from(fridays_history([10.0, 10.0, 10.0]), [friday(0), friday(1), friday(2)])
    assert (size.learned, size.used, size.early_minutes) == (1.0, "learned", 0)
    assert profile is not None
    assert set(profile.ratios) == {1.0}


def test_a_one_off_entry_keeps_its_configured_size_and_says_why() -> None:
    size, profile = learn_from(fridays_history([30.0, 30.0, 30.0]), [], kind="one_off")
    assert (size.used, size.learned, size.configured) == ("configured", None, 2.5)
    assert size.why == "a one-off entry has no past occurrences"
    assert profile is None


def test_too_few_past_occurrences_keep_the_configured_size_and_the_why_names_the_counts() -> None:
    size, profile = learn_from(fridays_history([30.0]), [friday(0)], minimum=2)
    assert (size.used, size.learned, size.occurrences) == ("configured", None, 1)
    assert size.why == "1 past occurrence(s) in the history, 2 needed"
    assert profile is None


def test_an_occurrence_whose_window_the_history_does_not_yet_hold_is_not_counted() -> None:
    # The history ends 10 minutes after the second Friday's event: its window (to 30 minutes after) is not whole.
    full = fridays_history([30.0, 30.0])
    end = int((WEEK + EVENT_START + EVENT_LENGTH + timedelta(minutes=10)) / SLOT)
    size, _ = learn_from(DemandSeries(T0, full.rps[:end]), [friday(0), friday(1)])
    assert (size.used, size.occurrences) == ("configured", 1)
    assert size.why == "1 past occurrence(s) in the history, 2 needed"


def test_traffic_arriving_ten_minutes_early_is_reported_as_ten_minutes_early() -> None:
    history = fridays_history([30.0, 30.0, 30.0], early=timedelta(minutes=10))
    size, profile = learn_from(history, [friday(0), friday(1), friday(2)])
    assert (size.learned, size.early_minutes) == (3.0, 10)
    assert profile is not None
    future = friday(3)
    assert profile.multiplier(future, future.start - timedelta(minutes=10)) == 3.0
    assert profile.multiplier(future, future.start - timedelta(minutes=15)) == 1.0


def test_only_the_newest_occurrences_are_learned_from() -> None:
    assert MAX_OCCURRENCES == 4
    # The oldest of five Fridays peaked at 5x; the four newer ones at 2x.
    past = [friday(week) for week in range(5)]
    size, _ = learn_from(fridays_history([50.0, 20.0, 20.0, 20.0, 20.0]), past)
    assert (size.learned, size.occurrences) == (2.0, 4)


# recent_slots, level_ratio and corrected: today's level against the seasonal forecast


def today(
    history: DemandSeries, now: datetime, growth: float, skip: list[tuple[datetime, datetime]] | None = None
) -> float:
    """Today's level as the history plan reads it: the recent slots against their forecast from the weeks before."""
    slots = recent_slots(now, skip or [])
    return level_ratio(history, slots, forecast(history, now, slots, growth))


def three_weeks_then(today: Sequence[float | None], usual: float = 10.0) -> tuple[DemandSeries, datetime]:
    """Three weeks flat at ``usual``, then ``today``'s slots; returns the series and the end of today's slots."""
    rps: list[float | None] = [usual] * (3 * SLOTS_PER_WEEK)
    return DemandSeries(T0, (*rps, *today)), NOW + len(today) * SLOT


def test_two_hours_forty_percent_below_the_forecast_give_a_ratio_of_point_six() -> None:
    history, now = three_weeks_then([6.0] * 36)  # three hours at 6 where the weeks before held 10
    assert today(history, now, growth=1.0) == 0.6


def test_the_forecast_it_compares_with_follows_the_trend() -> None:
    # Weeks at 10, 11, 12.1 (x1.1 a week) forecast 13.31 for today: 9.317 is 70 % of it.
    rps = [level for level in (10.0, 11.0, 12.1) for _ in range(SLOTS_PER_WEEK)] + [9.317] * 36
    history = DemandSeries(T0, tuple(rps))
    assert today(history, NOW + 36 * SLOT, growth=1.1) == pytest.approx(0.7, abs=1e-6)


def test_a_level_within_ten_percent_of_the_forecast_is_noise_and_changes_nothing() -> None:
    history, now = three_weeks_then([9.1] * 36)
    assert today(history, now, growth=1.0) == 1.0


def test_a_busier_day_gives_its_ratio_up_to_three_and_eleven_percent_above_is_still_noise() -> None:
    history, now = three_weeks_then([25.0] * 36)
    assert today(history, now, growth=1.0) == 2.5
    history, now = three_weeks_then([40.0] * 36)
    assert today(history, now, growth=1.0) == 3.0
    history, now = three_weeks_then([11.1] * 36)
    assert today(history, now, growth=1.0) == 1.0


def test_no_traffic_at_all_lowers_the_forecast_by_half_at_most() -> None:
    history, now = three_weeks_then([0.0] * 36)
    assert today(history, now, growth=1.0) == 0.5


def test_the_last_ten_minutes_are_not_read_as_they_may_not_be_in_cloudwatch_yet() -> None:
    # A day at 9.3 (noise) whose last two slots read 0 (datapoints not yet published read as no traffic): read,
    # they would make it (22 x 9.3) / 240 = 0.8525, a correction.
    history, now = three_weeks_then([9.3] * 34 + [0.0, 0.0])
    assert today(history, now, growth=1.0) == 1.0
    # Eleven minutes ago they would be read: 22 of 24 slots at 10, two at 0 -> 0.917, still noise; three hours
    # of 8 with the same two zeroes -> (22 x 8) / 240 = 0.733.
    history, now = three_weeks_then([8.0] * 34 + [0.0, 0.0, 8.0, 8.0])
    assert today(history, now, growth=1.0) == pytest.approx(0.733333, abs=1e-6)


def test_slots_an_event_touches_are_left_out_of_the_level() -> None:
    # Today's last hour at 4 was a planned maintenance event: left out, the hour before it at 10 is the level,
    # but 12 slots are fewer than two hours and still enough to read.
    history, now = three_weeks_then([10.0] * 24 + [4.0] * 14)
    event = (now - timedelta(minutes=70), now)
    assert today(history, now, growth=1.0) < 0.9
    assert today(history, now, growth=1.0, skip=[event]) == 1.0


def test_with_less_than_an_hour_to_compare_there_is_no_correction() -> None:
    # A week-old endpoint whose history starts 23 slots into last week's same day: of today's two-hour window
    # (slots 10 to 33 of today), only 23 to 33 have a week-back value to forecast from. Eleven slots: too few.
    start = NOW - WEEK + 23 * SLOT
    history = DemandSeries(start, tuple([10.0] * (SLOTS_PER_WEEK - 23) + [2.0] * 36))
    assert today(history, NOW + 36 * SLOT, growth=1.0) == 1.0
    # One slot more of history, and twelve slots say today runs at a fifth: 0.5 at most.
    longer = DemandSeries(start - SLOT, (10.0, *history.rps))
    assert today(longer, NOW + 36 * SLOT, growth=1.0) == 0.5


def test_a_correction_is_whole_now_and_fades_over_the_hours_ahead() -> None:
    now = NOW
    assert corrected(10.0, 0.5, now, now) == 5.0
    assert corrected(10.0, 0.5, now - timedelta(hours=1), now) == 5.0  # a slot already begun: as now
    assert corrected(10.0, 0.5, now + LEVEL_MEMORY, now) == pytest.approx(10 * 0.5 ** (1 / 2.718281828459045))
    assert corrected(10.0, 1.0, now + LEVEL_MEMORY, now) == 10.0
    assert corrected(10.0, 0.5, now + 10 * LEVEL_MEMORY, now) == pytest.approx(10.0, abs=0.001)
