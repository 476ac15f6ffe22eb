"""The approval gate's decide(): what ``fleetctl rollout approve/reject`` sends, with no link and no token shown."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetops.rollout.approval import ApprovalRecord, ApprovalRefusedError, Decision, check_usable
from fleetops.rollout.approval_gate import REJECTED_ERROR, DecideDeps, decide

NOW = datetime(2026, 12, 4, 10, 5, tzinfo=UTC)


class Store:
    def __init__(self) -> None:
        self.record = ApprovalRecord(
            approval_key="k" * 64,
            task_token="token-never-shown",
            rollout_id="v7",
            endpoint_name="manga-chat-prod",
            step_weight=5,
            summary="canary healthy",
            expires_at=int(NOW.timestamp()) + 600,
        )

    def put(self, record: ApprovalRecord) -> None:
        raise AssertionError("decide never issues an approval")

    def consume(self, key: str, decision: Decision, decided_by: str, now: datetime) -> ApprovalRecord:
        check_usable(self.record if key == self.record.approval_key else None, now)
        used = self.record.model_copy(update={"status": "used", "decision": decision, "decided_by": decided_by})
        self.record = used
        return used


def test_reject_sends_the_reason_with_who_and_when() -> None:
    sent: list[tuple[str, ...]] = []
    deps = DecideDeps(store=Store(), send_success=lambda *a: sent.append(a), send_failure=lambda *a: sent.append(a))

    result = decide("k" * 64, "reject", "arn:aws:iam::1:user/ayumi", NOW, deps, note="p95 TTFT looks worse")

    assert result.decision == "reject" and result.step_weight == 5
    assert sent == [
        (
            "token-never-shown",
            REJECTED_ERROR,
            "rejected by arn:aws:iam::1:user/ayumi at 2026-12-04T10:05:00+00:00: p95 TTFT looks worse",
        )
    ]


def test_a_second_decision_is_refused_and_sends_nothing() -> None:
    sent: list[tuple[str, ...]] = []
    store = Store()
    deps = DecideDeps(store=store, send_success=lambda *a: sent.append(a), send_failure=lambda *a: sent.append(a))
    decide("k" * 64, "approve", "arn:aws:iam::1:user/ayumi", NOW, deps)

    with pytest.raises(ApprovalRefusedError, match="already used: approve by arn:aws:iam::1:user/ayumi"):
        decide("k" * 64, "reject", "arn:aws:iam::1:user/kenji", NOW, deps)
    assert len(sent) == 1
