"""The responder's MinCapacity raises on the moto server: the step from CurrentInstanceCount, the raise record in
the remediation state table, its clear on OK, and the release calls the pre-scale reconciler makes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.remediation_stack import PLAYBOOK
from fleetops.aws.sagemaker_endpoint import VariantWeights
from fleetops.remediation.models import load_playbook
from fleetops.remediation.raises import RaiseRecord, release_due
from fleetops.remediation.state_table import RemediationStateStore
from tests.integration.remediation.conftest import ENDPOINT, Stack, alarm_event, build_responder

QUEUE = "manga-llm-fleet-prod-remediation-queue-depth-manga-chat-prod-primary"
RAISED_AT = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)  # events/alarm_queue_depth_alarm.json
CLEARED_AT = datetime(2026, 11, 21, 19, 31, tzinfo=UTC)  # events/alarm_queue_depth_ok.json


@pytest.fixture
def serving_six(stack: Stack, fast_endpoint_updates: None) -> Stack:
    """Target tracking already runs 6 instances of the primary while its MinCapacity is still 2."""
    stack.serve(6)
    assert VariantWeights().instance_count(ENDPOINT, "primary") == 6
    assert stack.min_capacity("primary") == 2
    return stack


def test_a_queue_alarm_steps_from_the_instances_serving_and_records_the_raise(serving_six: Stack) -> None:
    stack = serving_six
    response = build_responder(stack).respond(alarm_event("alarm_queue_depth_alarm"))  # x3.6: +4

    assert stack.min_capacity("primary") == 10  # 6 serving + 4, not MinCapacity 2 + 4
    (outcome,) = response.outcomes
    assert outcome.outcome == "applied"
    assert outcome.reason == "breach x3.60 of the threshold -> step +4 from 6 serving: MinCapacity 2 -> 10"
    assert stack.audit()[0].reason == outcome.reason

    store = RemediationStateStore(stack.state_table)
    assert store.raises(ENDPOINT) == [
        RaiseRecord(
            endpoint_name=ENDPOINT,
            variant_name="primary",
            min_capacity=10,
            raised_at=RAISED_AT,
            alarm_names=frozenset({QUEUE}),
            in_alarm=frozenset({QUEUE}),
        )
    ]
    assert store.get(ENDPOINT).last_scale_out_at == RAISED_AT  # the rails live in the same item, unharmed


def test_the_ok_event_records_the_clear_and_the_audit_says_when_the_raise_comes_down(serving_six: Stack) -> None:
    stack = serving_six
    responder = build_responder(stack)
    responder.respond(alarm_event("alarm_queue_depth_alarm"))
    response = responder.respond(alarm_event("alarm_queue_depth_ok"))

    assert stack.min_capacity("primary") == 10  # the responder itself never lowers anything
    (raised,) = RemediationStateStore(stack.state_table).raises(ENDPOINT)
    assert raised.in_alarm == frozenset() and raised.cleared_at == CLEARED_AT
    (recovery,) = response.outcomes
    assert recovery.reason.endswith(
        "the raise to MinCapacity 10 is released by the pre-scale reconciler once its alarms have been OK for 900s"
    )
    assert stack.audit()[-1].reason == recovery.reason


def test_a_new_alarm_that_raises_nothing_holds_the_raise_up_again(
    serving_six: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = serving_six
    responder = build_responder(stack)
    # The raise's four instances are still starting (the endpoint Updating): the fleet serves on 6 meanwhile.
    monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 60.0)
    responder.respond(alarm_event("alarm_queue_depth_alarm"))  # 19:02: MinCapacity 10, 6 serving
    responder.respond(alarm_event("alarm_queue_depth_ok"))  # 19:31
    again = responder.respond(alarm_event("alarm_queue_depth_alarm", at="2026-11-21T19:35:00Z"))

    assert again.outcomes[0].outcome == "skipped"  # 6 serving + 4 is not above MinCapacity 10
    (raised,) = RemediationStateStore(stack.state_table).raises(ENDPOINT)
    assert raised.in_alarm == {QUEUE} and raised.cleared_at is None


def test_the_reconcilers_release_calls_forget_only_the_raise_it_decided_on(serving_six: Stack) -> None:
    stack = serving_six
    responder = build_responder(stack)
    responder.respond(alarm_event("alarm_queue_depth_alarm"))
    responder.respond(alarm_event("alarm_queue_depth_ok"))
    store = RemediationStateStore(stack.state_table)
    hold = load_playbook(PLAYBOOK).rails.raise_hold
    (record,) = store.raises(ENDPOINT)
    assert not release_due(record, CLEARED_AT + hold - timedelta(seconds=1), hold)
    assert release_due(record, CLEARED_AT + hold, hold)

    # Between the reconciler's read and its forget_raise, the alarm fired again: the raise is kept.
    store.record_alarm(ENDPOINT, "primary", QUEUE)
    assert store.forget_raise(ENDPOINT, "primary", released=record) is False
    (held,) = store.raises(ENDPOINT)
    assert held.cleared_at is None

    store.record_clear(ENDPOINT, "primary", QUEUE, CLEARED_AT + timedelta(minutes=10))
    (record,) = store.raises(ENDPOINT)
    assert store.forget_raise(ENDPOINT, "primary", released=record) is True
    assert store.raises(ENDPOINT) == []
    assert store.get(ENDPOINT).last_scale_out_at == RAISED_AT
