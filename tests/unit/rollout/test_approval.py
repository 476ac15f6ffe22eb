"""Approval ids: opaque, stored hashed, refused when malformed, unknown, used or expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetops.rollout.approval import (
    ApprovalRecord,
    ApprovalRefusedError,
    approval_key,
    check_not_requester,
    check_usable,
    decision_deadline,
    new_approval_id,
)

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def record(**changes: object) -> ApprovalRecord:
    base: dict[str, object] = {
        "approval_key": "k",
        "task_token": "secret-token",
        "rollout_id": "r",
        "endpoint_name": "e",
        "step_weight": 50,
        "summary": "PASS",
        "expires_at": int((NOW + timedelta(hours=1)).timestamp()),
    }
    return ApprovalRecord.model_validate(base | changes)


def test_ids_are_unique_and_the_stored_key_is_a_hash_not_the_id() -> None:
    ids = {new_approval_id() for _ in range(100)}
    assert len(ids) == 100
    some = ids.pop()
    assert approval_key(some) == approval_key(some) != some and len(approval_key(some)) == 64


@pytest.mark.parametrize("bad", ["", "short", "x" * 44, "a" * 42 + "!"])
def test_malformed_ids_are_refused_before_any_lookup(bad: str) -> None:
    with pytest.raises(ApprovalRefusedError) as raised:
        approval_key(bad)
    assert (raised.value.reason, raised.value.http_status) == ("malformed", 400)


def test_unknown_used_and_expired_are_refused_with_their_own_answer() -> None:
    cases = [
        (None, "unknown", 404),
        (
            record(status="used", decision="approve", decided_by="arn:aws:iam::1:user/ayumi", decided_at="t"),
            "used",
            409,
        ),
        (record(expires_at=int(NOW.timestamp())), "expired", 410),
    ]
    for stored, reason, status in cases:
        with pytest.raises(ApprovalRefusedError) as raised:
            check_usable(stored, NOW)
        assert (raised.value.reason, raised.value.http_status) == (reason, status)
    with pytest.raises(ApprovalRefusedError, match="already used: approve by arn:aws:iam::1:user/ayumi"):
        check_usable(cases[1][0], NOW)


def test_a_pending_unexpired_approval_is_usable_and_its_token_stays_out_of_repr() -> None:
    pending = record()
    assert check_usable(pending, NOW) is pending
    assert "secret-token" not in repr(pending)


def test_an_approval_that_does_not_say_who_requested_it_cannot_be_decided() -> None:
    with pytest.raises(ApprovalRefusedError, match="does not say who requested it"):
        check_not_requester(record(), "arn:aws:iam::123456789012:user/bob")


@pytest.mark.parametrize(("timeout", "heartbeat", "after"), [(86400, 14400, 14400), (600, 600, 600), (600, None, 600)])
def test_the_deadline_is_when_step_functions_stops_waiting(timeout: int, heartbeat: int | None, after: int) -> None:
    assert decision_deadline(NOW, timeout, heartbeat) == int(NOW.timestamp()) + after
