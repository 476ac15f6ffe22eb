"""The rollout and rollback ASL files use the shared key names and every Task retries with full jitter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fleetops.tables import (
    LEASE_EXECUTION_ARN,
    LEASE_EXPIRES_AT,
    LEASE_HOLDER,
    LEASE_PK,
    LEASE_RESTORE_POINTER,
    LEASE_RETURN_CONFIG,
)
from tests.conftest import REPO

FILES = ["canary_rollout.asl.json", "rollback.asl.json"]


def states(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO / "statemachines" / name).read_text())
    return dict(data["States"])


def tasks(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    return ((k, v) for k, v in states(name).items() if v["Type"] == "Task")


@pytest.mark.parametrize("name", FILES)
def test_lease_writes_use_the_lease_key_names_from_fleetops_tables(name: str) -> None:
    lease_puts = [s for _, s in tasks(name) if s["Resource"].endswith("dynamodb:putItem") and "holder" in json.dumps(s)]
    assert lease_puts
    for state in lease_puts:
        optional = {LEASE_EXECUTION_ARN, LEASE_RETURN_CONFIG, LEASE_RESTORE_POINTER}
        assert {LEASE_PK, LEASE_HOLDER, LEASE_EXPIRES_AT} <= set(state["Parameters"]["Item"])
        assert set(state["Parameters"]["Item"]) - {LEASE_PK, LEASE_HOLDER, LEASE_EXPIRES_AT} <= optional
        assert set(state["Parameters"]["ExpressionAttributeNames"].values()) == {
            LEASE_PK,
            LEASE_EXPIRES_AT,
            LEASE_HOLDER,
        }


@pytest.mark.parametrize("name", FILES)
def test_every_task_retries_with_backoff_and_full_jitter_and_catches(name: str) -> None:
    for state_name, state in tasks(name):
        retries = state.get("Retry", [])
        assert retries, f"{state_name} has no Retry"
        assert all(r.get("JitterStrategy") == "FULL" and r.get("BackoffRate", 1) > 1 for r in retries), state_name
        assert state.get("Catch"), f"{state_name} has no Catch"


def test_every_rollout_task_after_the_lease_catches_into_the_rollback() -> None:
    before_lease = {"Validate", "AuditPlanned", "AcquireLease", "Rollback", "NotifyPromoted", "ReleaseLease"}
    for state_name, state in tasks("canary_rollout.asl.json"):
        if state_name not in before_lease:
            catches = state["Catch"]
            if state["Parameters"].get("TableName") == "${AuditTableName}":
                # An audit put's own retry finding its record continues (tests/integration/test_audit_states.py).
                own_retry, *catches = catches
                assert (own_retry["ErrorEquals"], own_retry["Next"]) == (
                    ["DynamoDB.ConditionalCheckFailedException"],
                    state["Next"],
                ), state_name
            assert [c["Next"] for c in catches] == ["Rollback"], state_name


def test_approval_waits_for_the_task_token_with_a_heartbeat_and_a_timeout() -> None:
    approval = states("canary_rollout.asl.json")["RequestApproval"]
    assert approval["Resource"].endswith("lambda:invoke.waitForTaskToken")
    assert approval["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
    assert "TimeoutSecondsPath" in approval and "HeartbeatSecondsPath" in approval
