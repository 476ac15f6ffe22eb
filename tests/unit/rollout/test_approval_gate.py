"""The approval gate's two halves with an in-memory approval store (a fake, not a mock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlparse

import pytest

from fleetops.rollout.approval import ApprovalRecord, ApprovalRefusedError, Decision, check_usable
from fleetops.rollout.approval_gate import (
    REJECTED_ERROR,
    ApprovalRequest,
    DecideDeps,
    NotifyDeps,
    request_approval,
    submit_decision,
)
from tests.conftest import load_event

NOW = datetime(2026, 11, 21, 10, 5, tzinfo=UTC)


class MemoryStore:
    """Same contract as ``fleetops.rollout.approval_table.ApprovalTable``, kept in a dict."""

    def __init__(self) -> None:
        self.items: dict[str, ApprovalRecord] = {}

    def put(self, record: ApprovalRecord) -> None:
        assert record.approval_key not in self.items
        self.items[record.approval_key] = record

    def consume(self, key: str, decision: Decision, decided_by: str, now: datetime) -> ApprovalRecord:
        record = check_usable(self.items.get(key), now)
        used = record.model_copy(
            update={"status": "used", "decision": decision, "decided_by": decided_by, "decided_at": now.isoformat()}
        )
        self.items[key] = used
        return used


def issue(store: MemoryStore) -> tuple[str, str]:
    """Request an approval; returns (the approval link, the mail text)."""
    mails: list[tuple[str, str]] = []
    request = ApprovalRequest.model_validate(load_event("approval_notify") | {"now": NOW.isoformat()})
    request_approval(
        request, NotifyDeps(store=store, publish=lambda s, m: mails.append((s, m)), approval_url="https://u/")
    )
    [(subject, message)] = mails
    assert subject == "Approve rollout llama-q4-v7 at 50%?"
    link = next(line.split(": ", 1)[1] for line in message.splitlines() if line.startswith("Approve:"))
    return link, message


def test_the_mail_carries_an_opaque_id_and_the_summary_never_the_token() -> None:
    store = MemoryStore()
    link, message = issue(store)
    token = load_event("approval_notify")["task_token"]
    approval_id = parse_qs(urlparse(link).query)["id"][0]
    assert token not in message and "PASS: canary 1840 req" in message
    [stored] = store.items.values()
    assert stored.task_token == token and approval_id not in stored.approval_key
    assert stored.expires_at == int((NOW + timedelta(seconds=86400)).timestamp())


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_decision_is_passed_once_to_step_functions_with_who_made_it(decision: Decision) -> None:
    store = MemoryStore()
    link, _ = issue(store)
    approval_id = parse_qs(urlparse(link).query)["id"][0]
    sent: list[tuple[str, ...]] = []
    deps = DecideDeps(
        store=store,
        send_success=lambda token, output: sent.append(("success", token, output)),
        send_failure=lambda token, error, cause: sent.append(("failure", token, error, cause)),
    )
    who = "arn:aws:iam::123456789012:user/ayumi"

    result = submit_decision(approval_id, decision, who, NOW, deps)

    assert (result.decision, result.decided_by, result.step_weight) == (decision, who, 50)
    [call] = sent
    if decision == "approve":
        assert call[0] == "success" and '"approved_by": "arn:aws:iam::123456789012:user/ayumi"' in call[2]
    else:
        assert call[0] == "failure" and call[2] == REJECTED_ERROR and who in call[3]
    with pytest.raises(ApprovalRefusedError, match="already used"):
        submit_decision(approval_id, "approve", "arn:aws:iam::123456789012:user/mallory", NOW, deps)
    assert len(sent) == 1  # nothing more reached Step Functions
