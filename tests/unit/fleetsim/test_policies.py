"""The simulated policies act through the project's own code: the template's numbers, the reconciler, decide()."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from devtools.cfn_yaml import load
from fleetops.remediation.models import load_playbook
from fleetsim import stack
from fleetsim.fleet import REQUEST_SECONDS, FleetParams, Minute, Scaler, run
from fleetsim.policies import AlarmResponse, CalendarPrescale, TargetTracking
from fleetsim.simulate import PLAYBOOK, load_setup
from fleetsim.tracking import concurrency
from fleetsim.traffic import Trace

T0 = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)
PARAMS = FleetParams(capacity_rps_per_instance=4.0, provisioning_s=(300, 300), container_ready_s=60)
CONCURRENCY = stack.CONCURRENT_REQUESTS_PER_MODEL
INVOCATIONS = stack.INVOCATIONS_PER_INSTANCE
VARIANT_TEMPLATE = stack.REPO / "templates" / "variant_remediation.yaml"


def _minute(arrived: int, serving: int, queued: float = 0.0, tick: int = 0) -> Minute:
    return Minute(T0 + timedelta(minutes=tick), arrived, arrived, 0, queued, 0.0, serving, serving, serving, 2)


def test_the_stack_declares_target_tracking_and_the_reconciler_schedule_the_simulator_reads() -> None:
    specs = stack.target_tracking("manga-chat-prod", "primary")
    assert specs == (
        stack.TargetTrackingSpec(INVOCATIONS, 220.0, 60, 600),
        stack.TargetTrackingSpec(CONCURRENCY, 36.0, 60, 600),
    )
    assert stack.prescale_interval_s() == 15 * 60


def _stack_tracking(tmp_path: Path, metric: str) -> Path:
    """template.yaml and the variant template, the policy tracking ``metric`` instead."""
    (tmp_path / "templates").mkdir()
    text = VARIANT_TEMPLATE.read_text().replace(f"MetricType: {CONCURRENCY}", f"MetricType: {metric}")
    (tmp_path / "templates" / "variant_remediation.yaml").write_text(text)
    (tmp_path / "template.yaml").write_text(stack.TEMPLATE.read_text())
    return tmp_path / "template.yaml"


def test_the_stack_reader_says_what_each_policy_tracks_and_refuses_a_metric_it_does_not_model(tmp_path: Path) -> None:
    template = _stack_tracking(tmp_path, INVOCATIONS)
    specs = stack.target_tracking("manga-chat-prod", "primary", template)
    assert [spec.metric for spec in specs] == [INVOCATIONS, INVOCATIONS]
    (tmp_path / "cpu").mkdir()
    other = _stack_tracking(tmp_path / "cpu", "SageMakerVariantCPUUtilization")
    with pytest.raises(stack.StackError, match="SageMakerVariantCPUUtilization"):
        stack.target_tracking("manga-chat-prod", "primary", other)


def test_the_templates_targets_state_the_simulators_request_seconds_and_their_utilisation() -> None:
    setup = load_setup("manga-chat-prod")
    by_metric = {spec.metric: spec.target for spec in setup.tracking}
    parameters = load(VARIANT_TEMPLATE)["Parameters"]
    concurrent = parameters["ConcurrentRequestsPerInstanceTarget"]["Description"]
    assert f"{REQUEST_SECONDS:g} s per request" in concurrent and "REQUEST_SECONDS" in concurrent
    # Little's law: requests in the container = requests/s x seconds there; one GPU at its rate holds 12, and the
    # target is three times that (a backlog of twice what it serves at once).
    assert by_metric[CONCURRENCY] / REQUEST_SECONDS / setup.variant.capacity_rps_per_instance == pytest.approx(3.0)
    assert "36 is 3x that" in concurrent
    # Invocations per minute over one GPU's requests per minute.
    utilisation = by_metric[INVOCATIONS] / 60 / setup.variant.capacity_rps_per_instance
    assert f"{utilisation:.0%}".replace("%", " %") in parameters["InvocationsPerInstanceTarget"]["Description"]


def test_concurrency_is_littles_law_for_the_minutes_arrivals_plus_the_queue() -> None:
    assert concurrency(_minute(600, 4)) == pytest.approx(600 / 60 * REQUEST_SECONDS)
    assert concurrency(_minute(600, 4, queued=25)) == pytest.approx(600 / 60 * REQUEST_SECONDS + 25)


def test_target_tracking_on_invocations_scales_out_after_three_minutes_above_the_target() -> None:
    tracking = TargetTracking(stack.TargetTrackingSpec(INVOCATIONS, 200.0, 60, 600))
    scaler = Scaler(2, 12, 4)
    for tick in range(3):
        assert scaler.desired == 4
        tracking.after(_minute(1000, 4, tick=tick), scaler)  # 250 per instance
    assert scaler.desired == 5  # ceil(1000 / 200)


def test_target_tracking_on_concurrency_scales_out_in_the_first_minute_above_the_target() -> None:
    tracking = TargetTracking(stack.TargetTrackingSpec(CONCURRENCY, 10.0, 60, 600))
    scaler = Scaler(2, 12, 4)
    tracking.after(_minute(800, 4, tick=0), scaler)  # 40 concurrent: 10 per instance, not above
    assert scaler.desired == 4
    tracking.after(_minute(1000, 4, tick=1), scaler)  # 50 concurrent: 12.5 per instance
    assert scaler.desired == 5  # ceil(50 / 10)


def test_queued_requests_count_toward_concurrency_but_not_toward_invocations() -> None:
    quiet_but_queued = [_minute(600, 4, queued=30, tick=tick) for tick in range(3)]  # 30 + 30 = 60 concurrent
    by_concurrency = TargetTracking(stack.TargetTrackingSpec(CONCURRENCY, 10.0, 60, 600))
    by_invocations = TargetTracking(stack.TargetTrackingSpec(INVOCATIONS, 200.0, 60, 600))
    scalers = Scaler(2, 12, 4), Scaler(2, 12, 4)
    for minute in quiet_but_queued:
        by_concurrency.after(minute, scalers[0])
        by_invocations.after(minute, scalers[1])
    assert scalers[0].desired == 6  # ceil(60 / 10)
    assert scalers[1].desired == 4  # 150 invocations per instance: below 200


def _first_request_s(specs: tuple[stack.TargetTrackingSpec, ...], before: int, during: int) -> float:
    """Seconds from a step spike's start to the first raise of the desired count."""
    trace = Trace(T0, (before,) * 20 + (during,) * 20)
    minutes = run(trace, TargetTracking(*specs), Scaler(2, 12, 4), PARAMS, seed=1)
    # A minute's record holds the desired count as the minute began: the spike's first minute shows the count
    # before it, and the first record above that shows the end of the minute the policy asked for more.
    first = next(m for m in minutes[20:] if m.desired > minutes[20].desired)
    return (first.at - trace.time(20)).total_seconds()


def test_a_step_spike_gets_its_first_capacity_request_within_a_minute_where_invocations_need_three() -> None:
    setup = load_setup("manga-chat-prod")
    invocations_only = tuple(spec for spec in setup.tracking if spec.metric == INVOCATIONS)
    assert _first_request_s(setup.tracking, 600, 1800) <= 60
    assert _first_request_s(invocations_only, 600, 1800) == 180


def test_target_tracking_scales_in_after_fifteen_minutes_below_ninety_percent_then_waits_its_cooldown() -> None:
    tracking = TargetTracking(stack.TargetTrackingSpec(CONCURRENCY, 10.0, 60, 600))
    scaler = Scaler(2, 12, 8)
    for tick in range(14):
        tracking.after(_minute(600, 8, tick=tick), scaler)  # 30 concurrent: 3.75 per instance
    assert scaler.desired == 8
    tracking.after(_minute(600, 8, tick=14), scaler)
    assert scaler.desired == 3  # ceil(30 / 10)
    for tick in range(15, 15 + 9):
        tracking.after(_minute(200, 3, tick=tick), scaler)
    assert scaler.desired == 3  # scale-in cooldown 600 s
    tracking.after(_minute(200, 3, tick=24), scaler)
    assert scaler.desired == 2  # ceil(10 / 10) = 1, held at MinCapacity


def test_two_policies_scale_out_when_either_asks_and_in_only_when_both_are_ready() -> None:
    tracking = TargetTracking(
        stack.TargetTrackingSpec(INVOCATIONS, 200.0, 60, 600), stack.TargetTrackingSpec(CONCURRENCY, 24.0, 60, 600)
    )
    scaler = Scaler(2, 12, 4)
    tracking.after(_minute(800, 4, queued=4 * 30, tick=0), scaler)  # 40 + 120 concurrent: 40 per instance
    assert scaler.desired == 7  # the concurrency policy at once: ceil(160 / 24); invocations (200) not above
    for tick in (1, 2):
        tracking.after(_minute(1330, 7, tick=tick), scaler)  # 190 invocations, 9.5 concurrent per instance
    for tick in range(3, 16):
        tracking.after(_minute(1000, 7, tick=tick), scaler)  # 143 invocations, 7.1 concurrent per instance
    assert scaler.desired == 7  # concurrency has been below 90 % of its target for 15 minutes, invocations for 13
    tracking.after(_minute(1000, 7, tick=16), scaler)
    assert scaler.desired == 7
    tracking.after(_minute(1000, 7, tick=17), scaler)
    assert scaler.desired == 5  # both ready: the larger of ceil(1000 / 200) and ceil(50 / 24)
    for tick in range(18, 40):
        tracking.after(_minute(1500, 5, tick=tick), scaler)  # invocations 300 > 200; concurrency 15 < 21.6
    assert scaler.desired == 8  # the invocations policy after 3 minutes: ceil(1500 / 200)


def test_the_real_reconciler_raises_capacity_lead_time_before_a_one_off_release() -> None:
    setup = load_setup("manga-chat-prod")
    release = {
        "name": "One Piece ch. 1100",
        "start": "2026-12-03T20:00",
        "timezone": "Asia/Tokyo",
        "duration_minutes": 180,
        "multiplier": 3,
    }  # a Thursday: no recurring event that evening
    prescale = CalendarPrescale(setup.config, setup.endpoint, [release], setup.prescale_interval_s)
    trace = Trace(datetime(2026, 12, 3, 9, 0, tzinfo=UTC), (720,) * 240)  # 18:00-22:00 JST
    minutes = {m.at: m for m in run(trace, prescale, Scaler(2, 12, 4), PARAMS, seed=1)}
    raised = datetime(2026, 12, 3, 11, 0, tzinfo=UTC) - timedelta(minutes=setup.config.prescale.lead_time_minutes)
    assert minutes[trace.start].min_capacity == 4  # the first run raises MinCapacity to the baseline's 4 at once
    assert minutes[raised - timedelta(minutes=1)].min_capacity == 4
    assert minutes[raised].min_capacity == 12  # ceil(12 requests/s x3 x headroom 1.25 / 4) = 12, the cap
    assert minutes[raised].desired == 12


def test_the_responders_decide_raises_min_capacity_on_a_queue_alarm_and_its_cooldown_holds_the_next() -> None:
    setup = load_setup("manga-chat-prod")
    responder = AlarmResponse(setup.playbook, setup.endpoint.name, setup.variant)
    scaler = Scaler(4, 12, 4)
    responder.after(_minute(1200, 4, queued=4 * 80, tick=0), scaler)  # 80 waiting per instance: x1.6 of 50
    assert (scaler.min_capacity, scaler.desired) == (6, 6)  # step +2 on MinCapacity
    responder.after(_minute(1200, 6, queued=0, tick=1), scaler)  # OK again
    responder.after(_minute(1200, 6, queued=6 * 300, tick=2), scaler)  # x6: +8, but within the 300 s cooldown
    assert scaler.min_capacity == 6
    assert any("cooldown" in reason for _, _, reason in responder.decisions)


def test_the_responder_follows_the_playbook_file(tmp_path: Path) -> None:
    setup = load_setup("manga-chat-prod")
    edited = tmp_path / "playbook.yaml"
    edited.write_text(PLAYBOOK.read_text().replace("threshold: 50", "threshold: 500", 1))
    responder = AlarmResponse(load_playbook(edited), setup.endpoint.name, setup.variant)
    scaler = Scaler(4, 12, 4)
    responder.after(_minute(1200, 4, queued=4 * 80), scaler)
    assert scaler.min_capacity == 4  # 80 waiting is no alarm at a threshold of 500


@pytest.mark.parametrize(("target", "settles_at"), [(7.5, 10), (10.0, 8)])
def test_the_templates_target_moves_the_reactive_fleet(target: float, settles_at: int) -> None:
    setup = load_setup("manga-chat-prod")
    trace = Trace(T0, (1500,) * 90)  # 75 concurrent
    concurrency_policy = next(spec for spec in setup.tracking if spec.metric == CONCURRENCY)
    policy = TargetTracking(replace(concurrency_policy, target=target))
    minutes = run(trace, policy, Scaler(2, 12, 4), PARAMS, seed=1)
    assert minutes[-1].serving == settles_at == -(-75 // target)
