"""The prescale Lambda handler with the sample events from ``events/`` and the shipped ``fleet.yaml``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest

from devtools.aws_resources import create_core_resources, create_endpoint
from devtools.lambda_dispatch import FakeLambdaContext, cold_start_environment, load_handler_module
from fleetops.aws.autoscaling import AutoScaling
from fleetops.prescale.events import InvalidEventError
from tests.conftest import REPO, load_event


@contextmanager
def stack_handler(environment: str) -> Iterator[ModuleType]:
    """The prescale function of a stack of ``environment`` (the template sets ENVIRONMENT_NAME), cold started."""
    resources = create_core_resources()
    create_endpoint("manga-chat-prod", {"primary": (4, 4, 12)})
    variables = {
        **resources.environment(),
        "ENVIRONMENT_NAME": environment,
        "FLEET_CONFIG_PATH": str(REPO / "layers/core/fleet_config/fleet.yaml"),
        "PLAYBOOK_PATH": str(REPO / "layers/core/fleet_config/playbook.yaml"),
    }
    with cold_start_environment(variables, ["prescale"]):
        yield load_handler_module("prescale")


@pytest.fixture
def handler() -> Iterator[ModuleType]:
    with stack_handler("prod") as module:
        yield module


def invoke(handler: ModuleType, event: dict[str, Any]) -> dict[str, Any]:
    return handler.lambda_handler(event, FakeLambdaContext(function_name="prescale"))  # type: ignore[no-any-return]


def test_scheduler_event_plans_the_week_from_the_shipped_calendar(
    handler: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = invoke(handler, load_event("prescale_schedule"))

    assert plan["trigger"] == "schedule" and plan["now"] == "2026-12-04T08:00:00Z"
    assert plan["invalid_entries"] == []
    created = AutoScaling().list_scheduled_actions("manga-chat-prod", "primary", "prescale-")
    assert len(created) == len(plan["changes"]) > 0
    # The emulator's CloudWatch holds no Invocations yet: the configured levels, and the plan says why.
    [variant] = plan["variants"]
    assert (variant["forecast"]["source"], variant["forecast"]["why"]) == (
        "configuration",
        "0.0 days of Invocations history, 7 needed: configured levels",
    )
    # Friday 2026-12-04 20:00 JST simulpub (x2.5): 10 instances from 19:20 JST (lead time 40 min).
    friday = next(a for a in created if a.name == "prescale-manga-chat-prod-primary-20261204T1020Z")
    assert (friday.schedule, friday.timezone, friday.min_capacity) == ("at(2026-12-04T19:20:00)", "Asia/Tokyo", 10)
    # Every change is counted in an EMF metric on stdout (CloudWatch Logs turns it into a metric).
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert emf and emf[-1]["PrescaleActionChanges"] == [float(len(created))]
    assert emf[-1]["PrescaleInvalidEntries"] == [0.0]


def test_calendar_change_event_runs_at_the_stream_record_time(handler: ModuleType) -> None:
    plan = invoke(handler, load_event("prescale_calendar_change"))
    assert (plan["trigger"], plan["now"]) == ("calendar-change", "2026-12-04T08:00:00Z")


def test_manual_dry_run_returns_the_plan_and_changes_nothing(handler: ModuleType) -> None:
    plan = invoke(handler, load_event("prescale_manual_dry_run"))
    assert plan["dry_run"] is True and plan["applied"] is False and plan["changes"]
    assert AutoScaling().list_scheduled_actions("manga-chat-prod", "primary", "prescale-") == []


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"trigger": "schedule"}, "time: Field required"),
        ({"time": "next friday"}, "time: Input should be a valid datetime"),
        ({"time": "2026-12-04T08:00:00"}, "time: Input should have timezone info"),
        ({"Records": []}, "Records: List should have at least 1 item"),
        ({"Records": [{"eventSource": "aws:sqs", "body": "x"}]}, "Records.0.eventSource"),
    ],
)
def test_a_malformed_event_fails_fast_with_a_clear_message(
    handler: ModuleType, event: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidEventError) as caught:
        invoke(handler, event)
    assert message in str(caught.value)
    assert AutoScaling().list_scheduled_actions("manga-chat-prod", "primary", "prescale-") == []


def test_a_dev_stack_plans_its_own_endpoint_and_never_touches_prod() -> None:
    with stack_handler("dev") as dev_handler:
        create_endpoint("manga-chat-dev", {"primary": (1, 1, 2)})
        plan = invoke(dev_handler, load_event("prescale_schedule"))

    assert plan["changes"] and {c["endpoint_name"] for c in plan["changes"]} == {"manga-chat-dev"}
    assert AutoScaling().list_scheduled_actions("manga-chat-prod", "primary", "prescale-") == []
    assert AutoScaling().list_scheduled_actions("manga-chat-dev", "primary", "prescale-")
