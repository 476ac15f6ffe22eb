"""``fleetctl status``, ``why`` and ``kill-switch`` on the emulated stack."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3

from devtools import operator_stack
from devtools import rollout_workflow as wf
from devtools.alarms import create_alarms
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.autoscaling import AutoScaling
from fleetops.aws.lease import EndpointLease, LeaseScope
from fleetops.aws.switches import KillSwitch
from fleetops.config import load_fleet_config
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.reconciler import PrescaleDeps, reconcile
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.versions import AdapterVersion
from tests.conftest import REPO
from tests.integration.fleetctl.conftest import check_schema, check_snapshot

FLEET = REPO / "layers/core/fleet_config/fleet.yaml"
ONE_PIECE = {
    "name": "One Piece ch. 1100",
    "start": "2026-12-04T20:00",
    "timezone": "Asia/Tokyo",
    "duration_minutes": 180,
    "multiplier": 3,
    "reason": "One Piece chapter 1100 release",
}


def _prescaled(stack: operator_stack.OperatorStack, at: datetime) -> None:
    """What the deployed reconciler does on its schedule: scheduled actions and their audit records."""
    env = stack.workflow.environment
    CalendarTable(env["CALENDAR_TABLE"]).put("one-piece-1100", ONE_PIECE)
    deps = PrescaleDeps(
        autoscaling=AutoScaling(),
        calendar=CalendarTable(env["CALENDAR_TABLE"]),
        audit=AuditTable(env["AUDIT_TABLE"]),
        kill_switch=KillSwitch(env["KILL_SWITCH_PARAMETER"]),
        lease=EndpointLease(env["LEASE_TABLE"]),
    )
    reconcile(load_fleet_config(FLEET), deps, now=at, trigger="schedule", dry_run=False, environment="prod")


def _pointer(endpoint: str = operator_stack.ENDPOINT) -> None:
    pointer = Pointer(
        model="manga-llama",
        version="v6",
        sagemaker_model=f"{endpoint}-v6-model",
        endpoint_config_name=f"{endpoint}-v6-config",
        rollout_id="llama-q4-v6",
        previous_endpoint_config_name=f"{endpoint}-v5-config",
        previous_version="v5",
    )
    boto3.client("ssm").put_parameter(Name=f"{wf.POINTER_PREFIX}/{endpoint}", Value=pointer.to_json(), Type="String")


def test_status_shows_capacity_the_next_actions_with_their_reasons_and_the_model(stack, cli) -> None:
    _prescaled(stack, datetime(2026, 11, 30, 23, 45, tzinfo=UTC))
    _pointer()

    shown = cli("status", "--actions", "8")

    assert shown.code == 0, shown.err
    check_snapshot("status", shown.out)
    # The reasons are the reconciler's own, read back from the audit trail.
    assert "One Piece chapter 1100 release (x3)" in shown.out


def test_status_json_follows_its_schema(stack, cli) -> None:
    _prescaled(stack, datetime(2026, 11, 30, 23, 45, tzinfo=UTC))
    _pointer()

    shown = cli("status", operator_stack.ENDPOINT, "--json", "--actions", "20")

    assert shown.code == 0, shown.err
    document = shown.json()
    check_schema(document, "status")
    [primary] = document["variants"]
    assert (primary["instances"], primary["min_capacity"], primary["max_capacity"]) == (4, 4, 12)
    one_piece = [a for a in document["upcoming_actions"] if "One Piece" in (a["reason"] or "")]
    # Capacity for the release the lead time (40 min) before 20:00 JST, and back after it ends (+15 min).
    assert (one_piece[0]["at"], one_piece[0]["min_capacity"]) == ("2026-12-04T10:20:00Z", 12)
    assert document["model_pointer"]["previous_endpoint_config_name"] == "manga-chat-prod-v5-config"
    assert document["kill_switch_engaged"] is False and document["lease"] is None


def test_status_names_the_adapter_versions_and_those_a_rollback_returns_to(stack, cli) -> None:
    def adapter(version: str, digit: str) -> AdapterVersion:
        return AdapterVersion(version=version, path=f"adapters/manga_domain/{version}", sha256=digit * 64)

    jp_style = AdapterVersion(version="v2", path="adapters/jp_style/v2", sha256="2" * 64)
    endpoint = operator_stack.ENDPOINT
    pointer = Pointer(
        model="manga-llama",
        version="v7",
        sha256="7" * 64,
        adapters={"manga_domain": adapter("v4", "4"), "jp_style": jp_style},
        sagemaker_model=f"{endpoint}-v7-model",
        endpoint_config_name=f"{endpoint}-manga-domain-v4-final",
        rollout_id="manga-domain-v4",
        previous_endpoint_config_name=f"{endpoint}-v7-config",
        previous_version="v7",
        previous_sha256="7" * 64,
        previous_adapters={"manga_domain": adapter("v3", "3"), "jp_style": jp_style},
    )
    boto3.client("ssm").put_parameter(Name=f"{wf.POINTER_PREFIX}/{endpoint}", Value=pointer.to_json(), Type="String")

    shown = cli("status", endpoint)
    document = cli("status", endpoint, "--json").json()

    assert shown.code == 0, shown.err
    assert "adapters: jp_style v2, manga_domain v4; rollback returns to manga_domain v3" in shown.out
    check_schema(document, "status")
    assert document["model_pointer"]["adapters"] == {"manga_domain": "v4", "jp_style": "v2"}
    assert document["model_pointer"]["previous_adapters"] == {"manga_domain": "v3", "jp_style": "v2"}
    assert document["model_pointer"]["sha256"] == "7" * 64


def test_status_names_alarms_in_alarm_and_the_lease_holder(stack, cli) -> None:
    names = create_alarms(operator_stack.STACK, {"RemediatedEndpointName": operator_stack.ENDPOINT})
    queue = next(n for n in names if "-queue-depth-" in n and n.endswith("-primary"))
    boto3.client("cloudwatch").set_alarm_state(AlarmName=queue, StateValue="ALARM", StateReason="QueueDepth 73 > 50")
    # A lease runs on the wall clock; this one must still be live at the commands' pinned --now.
    until_now = (datetime(2026, 12, 1, tzinfo=UTC) - datetime.now(UTC)).total_seconds()
    leases = EndpointLease(stack.workflow.lease_table)
    ttl_s = max(int(until_now), 0) + 3600
    leases.acquire(operator_stack.ENDPOINT, "alarm_responder/queue-depth", ttl_s=ttl_s, scope=LeaseScope.CAPACITY)
    leases.acquire(operator_stack.ENDPOINT, "canary_rollout/v7", ttl_s=ttl_s)

    document = cli("status", "--json").json()

    assert [(a["name"], a["variant"], a["reason"]) for a in document["alarms_in_alarm"]] == [
        (queue, "primary", "QueueDepth 73 > 50")
    ]
    # Both writers, each on its own lease: a rollout holds the config, a scale-out the capacity.
    assert document["capacity_lease"]["holder"] == "alarm_responder/queue-depth"
    assert document["lease"]["holder"] == "canary_rollout/v7"
    shown = cli("status")
    assert queue in shown.out and "QueueDepth 73 > 50" in shown.out
    assert "capacity lease: alarm_responder/queue-depth" in " ".join(shown.out.split())
    assert "config lease: canary_rollout/v7" in " ".join(shown.out.split())


def test_kill_switch_engage_and_release_are_audited_and_shown(stack, cli) -> None:
    engaged = cli("kill-switch", "engage", "--reason", "runaway scale-out at 2 a.m.")
    assert engaged.code == 0, engaged.err
    check_snapshot("kill_switch_engaged", engaged.out)
    assert KillSwitch(stack.outputs["KillSwitchParameterName"]).engaged()
    assert cli("status", "--json").json()["kill_switch_engaged"] is True

    again = cli("kill-switch", "engage", "--json")
    check_schema(again.json(), "kill_switch")
    assert again.json()["changed"] is False  # already engaged: nothing written, nothing audited

    released = cli("kill-switch", "release", "--json")
    check_schema(released.json(), "kill_switch")
    assert released.json()["engaged"] is False and released.json()["by"] == "arn:aws:sts::123456789012:user/moto"
    trail = cli("why", "--since", "30d", "--json").json()["entries"]
    assert [(e["actor"], e["action"], e["changes"]) for e in trail] == [
        ("arn:aws:sts::123456789012:user/moto", "engage kill switch", ["kill_switch: released → engaged"]),
        ("arn:aws:sts::123456789012:user/moto", "release kill switch", ["kill_switch: engaged → released"]),
    ]


def test_why_explains_every_automated_change_since_a_time(stack, cli) -> None:
    _prescaled(stack, datetime(2026, 11, 30, 23, 45, tzinfo=UTC))

    shown = cli("why", operator_stack.ENDPOINT, "--since", "1d")

    assert shown.code == 0, shown.err
    check_snapshot("why", shown.out)
    document = cli("why", "--since", "1d", "--json", "--actor", "prescale").json()
    check_schema(document, "why")
    assert document["entries"] and {e["actor"] for e in document["entries"]} == {"prescale"}
    assert cli("why", "--since", "1d", "--json", "--actor", "rollback").json()["entries"] == []
    quiet = cli("why", "--since", "2026-11-30T23:50Z")
    assert "nothing was changed or decided" in quiet.out
