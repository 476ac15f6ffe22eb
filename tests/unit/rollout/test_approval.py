"""Approval ids: opaque, stored hashed, refused when malformed, unknown, used or expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetops.rollout.approval import ApprovalRecord, ApprovalRefusedError, approval_key, check_usable, new_approval_id

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
