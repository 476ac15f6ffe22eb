"""The alarm responder on the moto server: sample events in, real capacity, weights, audit and SNS out."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from fleetops.aws import clients
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease, LeaseScope
from fleetops.aws.retry import FAST_RETRY
from fleetops.aws.sagemaker_endpoint import VariantWeights
from fleetops.aws.switches import ENGAGED
from fleetops.remediation.actions import ActionType
from fleetops.remediation.alarm import AlarmStateChangeEvent
from fleetops.remediation.responder import RemediationIncompleteError
from tests.aws_wire import THROTTLED, ScriptedSends, skip_backoff
from tests.integration.remediation.conftest import ENDPOINT, Stack, alarm_event, build_responder

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.literals import StatisticType


def _answer(status: int) -> AWSResponse:
    # botocore-stubs types headers as HTTPHeaders; botocore takes any mapping (it keeps a HeadersDict of it).
    return AWSResponse(
        url="https://application-autoscaling.us-east-1.amazonaws.com/",
        status_code=status,
        headers={},  # type: ignore[arg-type]
        raw=None,
    )


def test_queue_alarm_raises_min_capacity_by_the_step_for_the_breach(stack: Stack) -> None:
    # events/alarm_queue_depth_alarm.json: queue depth 180 over a threshold of 50 = x3.6 -> step +4.
    response = build_responder(stack).respond(alarm_event("alarm_queue_depth_alarm"))

    assert stack.min_capacity("primary") == 6
    (outcome,) = response.outcomes
    assert (outcome.action, outcome.outcome) == ("scale_out", "applied")
    assert outcome.before == {"min_capacity": 2, "max_capacity": 12}
    assert outcome.after == {"min_capacity": 6, "max_capacity": 12}
    (record,) = stack.audit()
    assert (record.actor, record.outcome, record.action) == ("alarm_responder", "applied", "scale_out:primary")
    assert record.trigger == "manga-llm-fleet-prod-remediation-queue-depth-manga-chat-prod-primary"
    (note,) = stack.notifications()
    assert note["Subject"] == "[ALARM] queue-depth on manga-chat-prod/primary (primary): applied"
    assert "MinCapacity 2 -> 6" in note["Message"] and "What to look at:" in note["Message"]


@pytest.mark.parametrize(("observed", "expected"), [(60.0, 4), (150.0, 6), (400.0, 10)])
def test_step_grows_with_the_breach(stack: Stack, observed: float, expected: int) -> None:
    build_responder(stack).respond(alarm_event("alarm_queue_depth_alarm", observed=observed))
    assert stack.min_capacity("primary") == expected


def test_step_is_clamped_at_the_cap_and_never_goes_above_it(stack: Stack, fast_endpoint_updates: None) -> None:
    AutoScaling().set_capacity(ENDPOINT, "primary", 10, 12)
    stack.serve(10)
    responder = build_responder(stack)

    first = responder.respond(alarm_event("alarm_queue_depth_alarm", observed=400.0))  # +8 from 10 -> 12 (cap)
    assert stack.min_capacity("primary") == 12
    assert "clamped to cap 12" in first.outcomes[0].reason

    later = responder.respond(alarm_event("alarm_queue_depth_alarm", at="2026-11-21T19:30:00Z", observed=400.0))
    assert stack.min_capacity("primary") == 12
    assert later.outcomes[0].outcome == "skipped"
    assert "already at or above the cap 12" in later.outcomes[0].reason


def test_cooldown_stops_a_second_step_for_the_same_spike(stack: Stack, fast_endpoint_updates: None) -> None:
    responder = build_responder(stack)
    responder.respond(alarm_event("alarm_queue_depth_alarm"))  # 19:02, 2 -> 6
    stack.serve(6)  # the raised MinCapacity's instances arrived
    # The alarm flapped OK -> ALARM again two minutes later: a new transition, inside the 300 s cooldown.
    again = responder.respond(alarm_event("alarm_queue_depth_alarm", at="2026-11-21T19:04:00Z"))
    assert stack.min_capacity("primary") == 6
    assert again.outcomes[0].outcome == "skipped"
    assert again.outcomes[0].reason == "cooldown: last scale-out 120s ago, cooldown is 300s"
    # After the cooldown the next breach steps again, from the 6 serving.
    responder.respond(alarm_event("alarm_queue_depth_alarm", at="2026-11-21T19:08:00Z"))
    assert stack.min_capacity("primary") == 10
    assert [r.outcome for r in stack.audit()] == ["applied", "skipped", "applied"]


def test_ok_records_the_recovery_and_never_scales_in(stack: Stack) -> None:
    responder = build_responder(stack)
    responder.respond(alarm_event("alarm_queue_depth_alarm"))
    response = responder.respond(alarm_event("alarm_queue_depth_ok"))

    assert stack.min_capacity("primary") == 6  # unchanged: scale-in stays with the target-tracking policy
    assert [(o.action, o.outcome) for o in response.outcomes] == [("record_recovery", "applied")]
    assert stack.audit()[-1].action == "record_recovery:primary"


@pytest.mark.parametrize(
    ("switch", "dry_run", "why"), [(ENGAGED, False, "kill switch engaged"), ("released", True, "dry run")]
)
def test_kill_switch_and_dry_run_change_nothing_but_leave_an_audit_record(
    stack: Stack, switch: str, dry_run: bool, why: str
) -> None:
    boto3.client("ssm").put_parameter(
        Name=stack.core.kill_switch_parameter, Value=switch, Overwrite=True, Type="String"
    )
    response = build_responder(stack, dry_run=dry_run).respond(alarm_event("alarm_queue_depth_alarm"))

    assert stack.min_capacity("primary") == 2
    (record,) = stack.audit()
    assert record.outcome == "planned" and record.dry_run is dry_run
    assert record.reason.startswith(f"{why}: would breach x3.60")
    assert record.after == {"min_capacity": 6, "max_capacity": 12}
    assert response.outcomes[0].outcome == "planned"
    assert len(stack.notifications()) == 1


def test_a_missing_kill_switch_counts_as_engaged(stack: Stack) -> None:
    """The switch fails closed: a deleted parameter cannot prove the operator did not pull it."""
    boto3.client("ssm").delete_parameter(Name=stack.core.kill_switch_parameter)

    response = build_responder(stack).respond(alarm_event("alarm_queue_depth_alarm"))

    assert stack.min_capacity("primary") == 2
    assert response.outcomes[0].outcome == "planned"
    (record,) = stack.audit()
    assert record.reason.startswith("kill switch engaged")


def test_a_dev_stack_never_acts_on_an_endpoint_fleet_yaml_lists_for_prod(stack: Stack) -> None:
    response = build_responder(stack, environment="dev").respond(alarm_event("alarm_queue_depth_alarm"))

    assert response.status == "ignored", response
    assert "'manga-chat-prod' is not managed by this stack (fleet.yaml for environment 'dev'" in response.reason
    assert stack.min_capacity("primary") == 2 and stack.audit() == []


def stand_in_rollback(stack: Stack) -> None:
    """Test double: a state machine with the rollback workflow's input contract (the real one runs in
    tests/integration/workflows)."""
    stack.rollback_arn = boto3.client("stepfunctions").create_state_machine(
        name="rollback",
        definition='{"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}',
        roleArn="arn:aws:iam::123456789012:role/sfn",
    )["stateMachineArn"]


def test_canary_oom_starts_the_rollback_workflow_once_per_transition(stack: Stack) -> None:
    sfn = boto3.client("stepfunctions")
    stand_in_rollback(stack)
    responder = build_responder(stack)

    first = responder.respond(alarm_event("alarm_oom_canary_alarm"))
    second = responder.respond(alarm_event("alarm_oom_canary_alarm"))  # redelivered past the idempotency layer

    executions = sfn.list_executions(stateMachineArn=stack.rollback_arn)["executions"]
    assert len(executions) == 1
    described = sfn.describe_execution(executionArn=executions[0]["executionArn"])
    payload = json.loads(described["input"])
    assert payload["endpoint_name"] == ENDPOINT and payload["requested_by"] == "alarm_responder"
    assert payload["canary_variant_name"] == "canary" and payload["rollback_id"] == executions[0]["name"]
    assert "oom alarm" in payload["reason"] and "canary" in payload["reason"]
    assert first.outcomes[0].after == {"execution_arn": executions[0]["executionArn"]}
    assert "already started" in second.outcomes[0].reason
    assert [o.action for o in first.outcomes] == ["rollback"]
    assert stack.min_capacity("canary") == 1  # containment never adds canary capacity


def test_canary_oom_without_a_workflow_sets_the_canary_weight_to_zero(
    stack: Stack, fast_endpoint_updates: None
) -> None:
    # Relies on the project's SageMaker emulator extension: plain moto 5.2.5 drops a weight of 0.
    response = build_responder(stack).respond(alarm_event("alarm_oom_canary_alarm"))

    assert VariantWeights().weights(ENDPOINT) == {"primary": 1.0, "canary": 0.0}
    (outcome,) = response.outcomes
    assert outcome.outcome == "applied" and "canary weight set to 0" in outcome.reason
    assert outcome.before == {"primary": 1.0, "canary": 1.0}
    assert outcome.after == {"primary": 1.0, "canary": 0.0}


def test_a_canary_rollback_goes_ahead_under_the_kill_switch_and_a_spent_rate_limit(
    stack: Stack, fast_endpoint_updates: None
) -> None:
    """A load incident: scale-outs have used the hour's changes (the state table says so) and the operator has
    pulled the kill switch. The canary's error alarm still takes its traffic away: the on-call sees "applied"
    and why, not a "skipped" that no later event would retry while the canary keeps serving."""
    boto3.client("ssm").put_parameter(
        Name=stack.core.kill_switch_parameter, Value=ENGAGED, Overwrite=True, Type="String"
    )
    responder = build_responder(stack)
    alarm = alarm_event("alarm_oom_canary_alarm")
    for minutes in range(1, 7):
        responder.ports.rails.record(ENDPOINT, ActionType.SCALE_OUT, alarm.time - timedelta(minutes=minutes))

    response = responder.respond(alarm)

    assert VariantWeights().weights(ENDPOINT) == {"primary": 1.0, "canary": 0.0}
    (record,) = stack.audit()
    assert record.outcome == "applied", record
    assert "goes ahead despite: kill switch engaged; rate limit: 6 fleet changes in the last hour" in record.reason
    assert response.outcomes[0].outcome == "applied"


def recovered_alarm(name: str, metric: str, statistic: StatisticType, threshold: float, reason: str) -> Any:
    """The gateway alarm ``name`` in CloudWatch, back to OK (``reason``) by the time its ALARM event arrives."""
    cloudwatch = boto3.client("cloudwatch")
    cloudwatch.put_metric_alarm(
        AlarmName=name, Namespace="MangaLLM/Gateway", MetricName=metric, Statistic=statistic,
        Period=60, EvaluationPeriods=1, Threshold=threshold, ComparisonOperator="GreaterThanThreshold",
    )  # fmt: skip
    cloudwatch.set_alarm_state(AlarmName=name, StateValue="OK", StateReason=reason)
    return cloudwatch


def test_a_late_alarm_event_whose_alarm_is_ok_again_is_dropped_and_audited(stack: Stack) -> None:
    """An ALARM event delivered after its alarm went OK (EventBridge and Lambda retries, out of order) no longer
    scales anything out: the responder asks CloudWatch, and the audit says why it did nothing. Once the alarm is
    in ALARM again, the same kind of event acts."""
    event = alarm_event("alarm_queue_depth_alarm")
    cloudwatch = recovered_alarm(event.detail.alarm_name, "QueueDepth", "Maximum", 50.0, "recovered")

    response = build_responder(stack).respond(event)

    assert response.status == "ignored", response
    assert response.reason.startswith("stale event: the alarm has been OK since "), response.reason
    assert "this ALARM from 2026-11-21T19:02:00+00:00 no longer holds" in response.reason
    assert stack.min_capacity("primary") == 2
    (record,) = stack.audit()
    assert (record.action, record.outcome, record.reason) == ("stale_event:primary", "skipped", response.reason)

    cloudwatch.set_alarm_state(AlarmName=event.detail.alarm_name, StateValue="ALARM", StateReason="breached again")
    build_responder(stack).respond(alarm_event("alarm_queue_depth_alarm", at="2026-11-21T19:30:00Z"))
    assert stack.min_capacity("primary") == 6


def test_a_late_canary_alarm_event_whose_alarm_is_ok_again_starts_no_rollback(stack: Stack) -> None:
    """A canary's OOM ALARM delivered after its alarm went OK (the canary now serving is a newer, healthy one)
    starts no rollback workflow, which would abort that newer rollout; the audit says why."""
    sfn = boto3.client("stepfunctions")
    stand_in_rollback(stack)
    event = alarm_event("alarm_oom_canary_alarm")
    recovered_alarm(event.detail.alarm_name, "OomCaught", "Sum", 0.0, "newer canary")

    response = build_responder(stack).respond(event)

    assert response.status == "ignored" and response.reason.startswith("stale event: the alarm has been OK"), response
    assert sfn.list_executions(stateMachineArn=stack.rollback_arn)["executions"] == []
    (record,) = stack.audit()
    assert (record.action, record.outcome) == ("stale_event:canary", "skipped")


def test_oom_on_the_primary_only_notifies(stack: Stack) -> None:
    response = build_responder(stack).respond(alarm_event("alarm_oom_primary_alarm"))
    assert response.outcomes == ()
    assert stack.min_capacity("primary") == 2 and stack.audit() == []
    (note,) = stack.notifications()
    assert note["Subject"].startswith("[ALARM] oom on manga-chat-prod/primary (primary)")
    assert "Context-budget trims" in note["Message"]


def test_a_second_capacity_writer_defers_the_scale_out_and_says_who_holds_which_lease(stack: Stack) -> None:
    lease = EndpointLease(stack.core.lease_table)
    assert lease.acquire(ENDPOINT, "prescale/2026-11-21T19:00Z", ttl_s=300, scope=LeaseScope.CAPACITY)

    with pytest.raises(RemediationIncompleteError, match="capacity lease held by prescale/2026-11-21T19:00Z"):
        build_responder(stack).respond(alarm_event("alarm_queue_depth_alarm"))

    assert stack.min_capacity("primary") == 2
    (record,) = stack.audit()
    assert record.outcome == "skipped"
    assert record.reason.startswith("deferred: endpoint 'manga-chat-prod': capacity lease held by prescale/")
    assert "deferred" in stack.notifications()[0]["Message"]
    current = lease.current(ENDPOINT, scope=LeaseScope.CAPACITY)
    assert current is not None and current.holder == "prescale/2026-11-21T19:00Z"  # the other writer keeps it


def test_a_scale_out_goes_ahead_while_a_rollout_holds_the_config_lease(stack: Stack) -> None:
    """A rollout holds the config lease for up to a week: a queue alarm on the primary still raises MinCapacity,
    and the rollout's lease row (holder, fencing token) is untouched, so the rollout carries on."""
    lease = EndpointLease(stack.core.lease_table)
    assert lease.acquire(ENDPOINT, "canary_rollout/llama-q4-v7", ttl_s=7 * 24 * 3600)
    rollouts = lease.current(ENDPOINT)

    response = build_responder(stack).respond(alarm_event("alarm_queue_depth_alarm"))

    assert response.outcomes[0].outcome == "applied" and stack.min_capacity("primary") == 6
    assert lease.current(ENDPOINT) == rollouts
    assert lease.current(ENDPOINT, scope=LeaseScope.CAPACITY) is None  # given back


def test_the_canary_weight_waits_for_a_rollout_holding_the_config_lease(
    stack: Stack, fast_endpoint_updates: None
) -> None:
    """Without a rollback workflow the responder sets the canary's weight itself: a config write, so it defers
    to the rollout (or rollback) holding the config lease, never racing its traffic changes."""
    lease = EndpointLease(stack.core.lease_table)
    assert lease.acquire(ENDPOINT, "rollback/ops-1", ttl_s=600)

    with pytest.raises(RemediationIncompleteError, match="config lease held by rollback/ops-1"):
        build_responder(stack).respond(alarm_event("alarm_oom_canary_alarm"))

    assert VariantWeights().weights(ENDPOINT) == {"primary": 1.0, "canary": 1.0}
    (record,) = stack.audit()
    assert record.outcome == "skipped" and "config lease held by rollback/ops-1" in record.reason


def test_throttling_is_retried_until_the_change_lands(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    # Test double, named: moto cannot throttle, so ScriptedSends answers the first two RegisterScalableTarget
    # sends with ThrottlingException at botocore's wire; botocore's standard retries send it again and the
    # third reaches moto. tests/unit/test_retry.py checks who retries what.
    client = clients.client("application-autoscaling")
    wire = ScriptedSends([THROTTLED, THROTTLED]).attach(client, "RegisterScalableTarget")
    backoffs = skip_backoff(monkeypatch)
    responder = build_responder(stack, autoscaling=AutoScaling(client=client, retry=FAST_RETRY))

    response = responder.respond(alarm_event("alarm_queue_depth_alarm"))

    assert wire.sends == 3 and len(backoffs) == 2
    assert response.outcomes[0].outcome == "applied"
    assert stack.min_capacity("primary") == 6


def test_a_refused_change_is_audited_notified_and_raised_for_the_dlq(stack: Stack) -> None:
    # Test double, named: AWS answers a non-retryable ValidationException (e.g. a target deregistered meanwhile).
    client = boto3.client("application-autoscaling")

    def refuse(**_: object) -> tuple[object, dict[str, object]]:
        error = {"Code": "ValidationException", "Message": "Unable to find scalable target"}
        return _answer(400), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}

    # botocore-stubs types handlers as returning None; a before-call handler's (response, parsed) answers the call.
    client.meta.events.register("before-call.application-autoscaling.RegisterScalableTarget", refuse)  # type: ignore[arg-type]
    responder = build_responder(stack, autoscaling=AutoScaling(client=client, retry=FAST_RETRY))

    with pytest.raises(RemediationIncompleteError, match="Unable to find scalable target"):
        responder.respond(alarm_event("alarm_queue_depth_alarm"))

    (record,) = stack.audit()
    assert record.outcome == "failed" and "AWS refused" in record.reason
    assert stack.notifications()[0]["Subject"].endswith(": failed")


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ("alarm_foreign", "is not one of ours"),
    ],
)
def test_alarms_we_do_not_own_are_ignored(stack: Stack, event: str, why: str) -> None:
    response = build_responder(stack).respond(alarm_event(event))
    assert response.status == "ignored" and why in response.reason
    assert stack.audit() == [] and stack.notifications() == []


def test_unknown_variant_is_ignored_without_touching_anything(stack: Stack) -> None:
    raw = alarm_event("alarm_queue_depth_alarm").model_dump(by_alias=True, mode="json")
    raw["detail"]["alarmName"] = raw["detail"]["alarmName"].replace("-primary", "-shadow")
    raw["detail"]["configuration"]["metrics"][0]["metricStat"]["metric"]["dimensions"]["VariantName"] = "shadow"
    response = build_responder(stack).respond(AlarmStateChangeEvent.model_validate(raw))
    assert response.status == "ignored"
    assert "has no managed variant 'shadow'" in response.reason
    assert stack.min_capacity("primary") == 2 and stack.audit() == []


def test_rate_limit_state_survives_between_invocations(stack: Stack, fast_endpoint_updates: None) -> None:
    # A playbook tightened to 2 fleet changes per hour and no cooldown: the third breach in the hour is held.
    shipped = build_responder(stack).config.playbook
    tight = shipped.model_copy(
        update={"rails": shipped.rails.model_copy(update={"cooldown_seconds": 0, "max_actions_per_hour": 2})}
    )
    for minute in ("19:02", "19:10", "19:20"):
        # A fresh responder each time: the memory is the DynamoDB state table, not the process.
        build_responder(stack, playbook=tight).respond(
            alarm_event("alarm_queue_depth_alarm", at=f"2026-11-21T{minute}:00Z", observed=60.0)
        )
        stack.serve(stack.min_capacity("primary"))  # each raise's instances arrive before the next breach
    assert stack.min_capacity("primary") == 6  # 2 -> 4 -> 6, then held
    assert [r.outcome for r in stack.audit()] == ["applied", "applied", "skipped"]
    assert stack.audit()[-1].reason == "rate limit: 2 fleet changes in the last hour, at most 2"


def test_a_change_waits_until_the_endpoint_is_in_service(stack: Stack) -> None:
    # Relies on the project's SageMaker emulator extension: real Updating -> InService transitions.
    from devtools.emulator_extensions import sagemaker as extension

    extension.install()
    saved = extension.behaviour.update_seconds
    extension.behaviour.update_seconds = 1.0
    try:
        VariantWeights().set_weight(ENDPOINT, "canary", 0.5)  # endpoint Updating for 1 s
        assert boto3.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "Updating"
        began = time.monotonic()
        response = build_responder(stack).respond(alarm_event("alarm_queue_depth_alarm"))
        waited = time.monotonic() - began
    finally:
        extension.behaviour.update_seconds = saved
    assert response.outcomes[0].outcome == "applied" and stack.min_capacity("primary") == 6
    assert waited >= 0.5  # it really waited for the update to finish


def test_an_endpoint_that_stays_updating_defers_the_change(stack: Stack) -> None:
    from devtools.emulator_extensions import sagemaker as extension
    from fleetops.aws.sagemaker_endpoint import wait_in_service

    extension.install()
    saved = extension.behaviour.update_seconds
    extension.behaviour.update_seconds = 30.0
    try:
        VariantWeights().set_weight(ENDPOINT, "canary", 0.5)
        responder = build_responder(stack, wait_ready=lambda name: wait_in_service(name, timeout_s=0.5, max_wait_s=0.1))
        with pytest.raises(RemediationIncompleteError, match="is Updating, not InService"):
            responder.respond(alarm_event("alarm_queue_depth_alarm"))
    finally:
        extension.behaviour.update_seconds = saved
    assert stack.min_capacity("primary") == 2
    assert stack.audit()[0].outcome == "skipped"
    lease = EndpointLease(stack.core.lease_table).current(ENDPOINT, scope=LeaseScope.CAPACITY)
    assert lease is None  # released even though the change was deferred
