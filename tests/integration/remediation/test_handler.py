"""The AlarmResponder Lambda handler end to end on the moto server: idempotency, bad input, metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

from devtools.lambda_dispatch import FakeLambdaContext
from devtools.remediation_stack import cold_start
from fleetops.aws.lease import EndpointLease, LeaseScope
from fleetops.remediation.playbook_file import PlaybookError
from fleetops.remediation.responder import RemediationIncompleteError
from fleetops.settings import SettingsError
from tests.conftest import load_event
from tests.integration.remediation.conftest import Stack


@pytest.fixture
def handler(stack: Stack) -> Iterator[ModuleType]:
    with cold_start(stack) as module:
        yield module


def invoke(handler: ModuleType, event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = handler.lambda_handler(event, FakeLambdaContext(function_name="alarm-responder"))
    return result


def emitted_metrics(out: str) -> dict[str, float]:
    """Sum the EMF metrics Powertools printed (one JSON document per flush)."""
    totals: dict[str, float] = {}
    for line in out.splitlines():
        if '"_aws"' not in line:
            continue
        doc = json.loads(line)
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = doc[metric["Name"]]
                totals[metric["Name"]] = totals.get(metric["Name"], 0) + sum(
                    value if isinstance(value, list) else [value]
                )
    return totals


def test_the_same_alarm_transition_delivered_twice_acts_once(
    handler: ModuleType, stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    event = load_event("alarm_queue_depth_alarm")
    first = invoke(handler, event)
    second = invoke(handler, event)  # EventBridge delivers at least once

    assert first == second
    assert stack.min_capacity("primary") == 6  # 2 -> 6 once, not 2 -> 6 -> 10
    assert len(stack.audit()) == 1 and len(stack.notifications()) == 1
    # Powertools idempotency stored the transition in the idempotency table on the emulator.
    items = boto3.client("dynamodb").scan(TableName=stack.idempotency_table)["Items"]
    assert len(items) == 1 and items[0]["status"]["S"] == "COMPLETED"
    assert emitted_metrics(capsys.readouterr().out).get("RemediationActions") == 1


def test_a_new_transition_of_the_same_alarm_is_a_new_event(
    handler: ModuleType, stack: Stack, fast_endpoint_updates: None
) -> None:
    event = load_event("alarm_queue_depth_alarm")
    invoke(handler, event)
    stack.serve(6)  # the raise's instances arrived; the next step counts from them
    event["detail"]["state"]["timestamp"] = "2026-11-21T19:09:00.000+0000"
    event["time"] = "2026-11-21T19:09:00Z"
    invoke(handler, event)
    assert stack.min_capacity("primary") == 10


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ({}, "not a CloudWatch alarm state change"),
        (
            {"detail-type": "Scheduled Event", "source": "aws.events", "id": "1", "time": "2026-11-21T19:00:00Z"},
            "detail-type",
        ),
        ("truncated", "detail"),
    ],
)
def test_malformed_events_are_counted_and_answered_not_crashed(
    handler: ModuleType, stack: Stack, capsys: pytest.CaptureFixture[str], event: Any, says: str
) -> None:
    if event == "truncated":
        event = load_event("alarm_queue_depth_alarm")
        del event["detail"]["state"]
    result = invoke(handler, event)

    assert result["status"] == "ignored" and says in result["reason"]
    assert stack.min_capacity("primary") == 2 and stack.audit() == []
    assert emitted_metrics(capsys.readouterr().out).get("RemediationIgnoredEvents") == 1


def test_foreign_alarm_is_ignored_and_counted(
    handler: ModuleType, stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    result = invoke(handler, load_event("alarm_foreign"))
    assert result["status"] == "ignored" and "checkout-api-5xx" in result["reason"]
    assert emitted_metrics(capsys.readouterr().out).get("RemediationIgnoredEvents") == 1
    assert stack.notifications() == []


def test_dry_run_from_the_environment(stack: Stack) -> None:
    stack.extra_env["DRY_RUN"] = "true"
    with cold_start(stack) as module:
        result = invoke(module, load_event("alarm_queue_depth_alarm"))
    assert result["dry_run"] is True and result["outcomes"][0]["outcome"] == "planned"
    assert stack.min_capacity("primary") == 2
    assert stack.audit()[0].dry_run is True


def test_a_wrong_environment_fails_the_cold_start_with_every_problem(stack: Stack) -> None:
    stack.extra_env["READY_TIMEOUT_SECONDS"] = "soon"
    stack.extra_env["IDEMPOTENCY_TABLE"] = ""

    with pytest.raises(SettingsError) as caught, cold_start(stack):
        pass
    # What the operator sees in the INIT error of the function's log:
    assert "Settings: bad environment" in str(caught.value)
    assert "READY_TIMEOUT_SECONDS: Input should be a valid number" in str(caught.value)
    assert "IDEMPOTENCY_TABLE: String should have at least 1 character" in str(caught.value)


def test_a_broken_playbook_fails_the_cold_start_naming_the_file(stack: Stack, tmp_path: Path) -> None:
    broken = tmp_path / "playbook.yaml"
    broken.write_text("version: x\nrails: {cooldown_seconds: -1, max_actions_per_hour: 6, lease_ttl_seconds: 120}\n")
    stack.extra_env["PLAYBOOK_PATH"] = str(broken)
    with pytest.raises(PlaybookError, match=f"invalid playbook {broken}"), cold_start(stack):
        pass


def test_a_deferred_event_fails_the_invocation_and_its_retry_acts(
    handler: ModuleType, stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # A pre-scale run holds the capacity lease (a rollout's config lease would not defer a scale-out).
    lease, capacity = EndpointLease(stack.core.lease_table), LeaseScope.CAPACITY
    assert lease.acquire("manga-chat-prod", "prescale/2026-11-21T19:00Z", ttl_s=300, scope=capacity)
    event = load_event("alarm_queue_depth_alarm")

    # Lambda sees the failure and retries the event later (then the DLQ); nothing was stored as done.
    with pytest.raises(RemediationIncompleteError, match="capacity lease held by prescale/2026-11-21T19:00Z"):
        invoke(handler, event)
    assert stack.min_capacity("primary") == 2
    assert boto3.client("dynamodb").scan(TableName=stack.idempotency_table)["Items"] == []

    assert lease.release("manga-chat-prod", "prescale/2026-11-21T19:00Z", scope=capacity)
    retried = invoke(handler, event)  # Lambda's async retry of the same event
    assert retried["outcomes"][0]["outcome"] == "applied" and stack.min_capacity("primary") == 6
    # Both records carry the event's time (the handler's "now"), so their order within it is not defined.
    assert sorted(r.outcome for r in stack.audit()) == ["applied", "skipped"]
    counted = emitted_metrics(capsys.readouterr().out)
    assert (counted.get("RemediationSkipped"), counted.get("RemediationActions")) == (1, 1)
