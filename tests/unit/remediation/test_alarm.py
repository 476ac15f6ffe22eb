"""Parsing EventBridge alarm events: kind, endpoint, variant, state, breach size; and what is not ours."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fleetops.remediation.alarm import AlarmStateChangeEvent, IgnoredAlarmError, parse_alarm
from fleetops.remediation.models import Playbook
from tests.conftest import EVENTS, load_event
from tests.unit.remediation.conftest import PREFIX, event, parsed


@pytest.mark.parametrize(
    ("name", "kind", "variant", "state", "breach"),
    [
        ("alarm_queue_depth_alarm", "queue-depth", "primary", "ALARM", 3.6),
        ("alarm_queue_depth_ok", "queue-depth", "primary", "OK", 1.0),
        ("alarm_saturation_alarm", "saturation", "primary", "ALARM", 97.5 / 90),
        ("alarm_oom_canary_alarm", "oom", "canary", "ALARM", 1.0),  # threshold 0: breach size unknown -> 1
        ("alarm_oom_primary_alarm", "oom", "primary", "ALARM", 1.0),
        ("alarm_breaker_trips_canary_alarm", "breaker-trips", "canary", "ALARM", 1.0),
        ("alarm_engine_restarts_primary_alarm", "engine-restarts", "primary", "ALARM", 1.0),
        ("alarm_kv_cache_primary_alarm", "kv-cache", "primary", "ALARM", 98.1 / 95),
        ("alarm_ttft_p95_canary_alarm", "ttft-p95", "canary", "ALARM", 710.5 / 500),
        ("alarm_error_rate_canary_alarm", "error-rate", "canary", "ALARM", 11.0 / 5),
        ("alarm_prefix_cache_canary_alarm", "prefix-cache", "canary", "ALARM", 1.0),  # below its threshold
        ("alarm_adapter_latency_canary_alarm", "adapter-latency", "canary", "ALARM", 13002.0 / 10000),
        ("alarm_gpu_unhealthy_primary_alarm", "gpu-unhealthy", "primary", "ALARM", 1.0),  # below its threshold
        ("alarm_queue_wait_p95_primary_alarm", "queue-wait-p95", "primary", "ALARM", 301.0 / 150),
        ("alarm_preemptions_canary_alarm", "preemptions", "canary", "ALARM", 1.0),  # threshold 0
    ],
)
def test_every_sample_event_parses(
    playbook: Playbook, name: str, kind: str, variant: str, state: str, breach: float
) -> None:
    alarm = parsed(playbook, name)
    assert (alarm.kind, alarm.endpoint_name, alarm.variant_name, alarm.state) == (
        kind,
        "manga-chat-prod",
        variant,
        state,
    )
    assert alarm.breach == pytest.approx(breach)


def test_every_kind_has_a_sample_event(playbook: Playbook) -> None:
    kinds = {parsed(playbook, p.stem).kind for p in EVENTS.glob("alarm_*.json") if p.stem != "alarm_foreign"}
    assert kinds == set(playbook.alarms)


def test_event_time_is_now(playbook: Playbook) -> None:
    alarm = parsed(playbook, "alarm_queue_depth_alarm")
    assert alarm.at.isoformat() == "2026-11-21T19:02:00+00:00"
    assert alarm.state_timestamp == "2026-11-21T19:02:00.000+0000"


def test_someone_elses_alarm_is_not_ours(playbook: Playbook) -> None:
    with pytest.raises(IgnoredAlarmError, match="'checkout-api-5xx' is not one of ours"):
        parse_alarm(event("alarm_foreign"), PREFIX, playbook)


def test_unknown_kind(playbook: Playbook) -> None:
    name = f"{PREFIX}gpu-melting-manga-chat-prod-primary"
    with pytest.raises(IgnoredAlarmError, match="unknown alarm kind in 'gpu-melting-manga-chat-prod-primary'"):
        parse_alarm(event("alarm_queue_depth_alarm", alarmName=name), PREFIX, playbook)


def test_name_must_agree_with_the_dimensions(playbook: Playbook) -> None:
    name = f"{PREFIX}queue-depth-manga-chat-prod-canary"  # but the metric's VariantName is primary
    with pytest.raises(IgnoredAlarmError, match="does not match its dimensions"):
        parse_alarm(event("alarm_queue_depth_alarm", alarmName=name), PREFIX, playbook)


def test_a_per_adapter_alarm_names_its_adapter(playbook: Playbook) -> None:
    assert parsed(playbook, "alarm_adapter_latency_canary_alarm").adapter == "jp_style"
    assert parsed(playbook, "alarm_ttft_p95_canary_alarm").adapter is None
    name = f"{PREFIX}adapter-latency-manga-chat-prod-canary-manga_domain"  # but the metric's Adapter is jp_style
    with pytest.raises(IgnoredAlarmError, match="adapter 'jp_style'"):
        parse_alarm(event("alarm_adapter_latency_canary_alarm", alarmName=name), PREFIX, playbook)


def test_kind_must_watch_its_metric(playbook: Playbook) -> None:
    raw = load_event("alarm_queue_depth_alarm")
    raw["detail"]["configuration"]["metrics"][0]["metricStat"]["metric"]["name"] = "KvCacheUsagePercent"
    with pytest.raises(IgnoredAlarmError, match="must watch QueueDepth"):
        parse_alarm(AlarmStateChangeEvent.model_validate(raw), PREFIX, playbook)


def test_missing_dimensions(playbook: Playbook) -> None:
    raw = load_event("alarm_queue_depth_alarm")
    raw["detail"]["configuration"]["metrics"][0]["metricStat"]["metric"]["dimensions"] = {}
    with pytest.raises(IgnoredAlarmError, match="has no EndpointName/VariantName dimensions"):
        parse_alarm(AlarmStateChangeEvent.model_validate(raw), PREFIX, playbook)


def test_garbled_reason_data_falls_back_to_the_smallest_step(playbook: Playbook) -> None:
    raw = load_event("alarm_queue_depth_alarm")
    raw["detail"]["state"]["reasonData"] = "{not json"
    alarm = parse_alarm(AlarmStateChangeEvent.model_validate(raw), PREFIX, playbook)
    assert (alarm.observed, alarm.threshold, alarm.breach) == (None, 50.0, 1.0)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda r: r.update({"detail-type": "EC2 Instance State-change Notification"}), "detail-type"),
        (lambda r: r["detail"]["state"].update(value="PANIC"), "detail.state.value"),
        (lambda r: r.update(time="yesterday"), "time"),
        (lambda r: r["detail"].pop("alarmName"), "detail.alarmName"),
    ],
)
def test_malformed_events_fail_validation_naming_the_field(change: object, where: str) -> None:
    raw = load_event("alarm_queue_depth_alarm")
    change(raw)  # type: ignore[operator]
    with pytest.raises(ValidationError) as caught:
        AlarmStateChangeEvent.model_validate(raw)
    assert where in str(caught.value)
