"""The approval gate's two halves with an in-memory approval store (a fake, not a mock).

The DynamoDB store's conditional writes are tested on the emulator (tests/integration/workflows/
test_approval_commit.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlparse

import pytest

from fleetops.audit import AuditRecord
from fleetops.rollout.approval import CLAIM_SECONDS, ApprovalRecord, ApprovalRefusedError, Decision, check_usable
from fleetops.rollout.approval_gate import (
    REJECTED_ERROR,
    ApprovalRequest,
    DecideDeps,
    NotifyDeps,
    TaskGoneError,
    request_approval,
    submit_decision,
    submit_for_rollout,
)
from fleetops.rollout.requester import RequesterUnknownError, RolloutRecord, new_record
from tests.conftest import load_event

NOW = datetime(2026, 11, 21, 10, 5, tzinfo=UTC)
REQUESTER = "arn:aws:iam::123456789012:user/ayumi"  # recorded for the execution of events/approval_notify.json


class MemoryStore:
    """Same contract as ``fleetops.rollout.approval_table.ApprovalTable``, kept in a dict."""

    def __init__(self) -> None:
        self.items: dict[str, ApprovalRecord] = {}
        # The request function's record of the sample execution (events/approval_notify.json).
        sample = load_event("approval_notify")
        self.requests = {
            sample["execution_name"]: new_record(
                sample["rollout_id"], REQUESTER, json.dumps(sample["execution_input"]), NOW - timedelta(hours=2)
            )
        }

    def rollout_record(self, execution_name: str) -> RolloutRecord | None:
        return self.requests.get(execution_name)

    def put(self, record: ApprovalRecord) -> None:
        assert record.approval_key not in self.items
        self.items[record.approval_key] = record

    def get(self, key: str) -> ApprovalRecord | None:
        return self.items.get(key)

    def pending(self, rollout_id: str) -> list[ApprovalRecord]:
        return [r for r in self.items.values() if r.rollout_id == rollout_id and r.status != "used"]

    def claim(self, key: str, decision: Decision, decided_by: str, now: datetime) -> ApprovalRecord:
        record = check_usable(self.items.get(key), now, decided_by, decision)
        update = {"status": "claimed", "decision": decision, "decided_by": decided_by}
        self.items[key] = record.model_copy(update=update | {"claimed_until": int(now.timestamp()) + CLAIM_SECONDS})
        return self.items[key]

    def release(self, key: str, decided_by: str) -> None:
        record = self.items[key]
        if record.status == "claimed" and record.decided_by == decided_by:
            update = {"status": "pending", "decision": None, "decided_by": None, "claimed_until": None}
            self.items[key] = record.model_copy(update=update)

    def complete(self, key: str, decision: Decision, decided_by: str, now: datetime) -> None:
        update = {"status": "used", "decision": decision, "decided_by": decided_by, "decided_at": now.isoformat()}
        self.items[key] = self.items[key].model_copy(update=update)


APPROVER = "arn:aws:iam::123456789012:user/kenji"


class Sent:
    """What reached Step Functions and the audit trail; ``fail`` makes the next sends raise it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.audit: list[AuditRecord] = []
        self.fail: list[Exception] = []

    def _send(self, *call: str) -> None:
        if self.fail:
            raise self.fail.pop(0)
        self.calls.append(call)

    def deps(self, store: MemoryStore) -> DecideDeps:
        return DecideDeps(
            store=store,
            send_success=lambda token, output: self._send("success", token, output),
            send_failure=lambda token, error, cause: self._send("failure", token, error, cause),
            audit=self.audit.append,
        )


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
    # The link lives as long as Step Functions waits: the heartbeat (4 h), sooner than the timeout (24 h).
    assert stored.expires_at == int((NOW + timedelta(seconds=14400)).timestamp())
    assert "expire at 2026-11-21T14:05:00+00:00" in message
    assert stored.requested_by == REQUESTER and f"Requested by {REQUESTER}" in message


def test_without_a_heartbeat_the_link_lives_until_the_timeout() -> None:
    store = MemoryStore()
    event = load_event("approval_notify") | {"now": NOW.isoformat(), "heartbeat_seconds": None}
    request_approval(ApprovalRequest.model_validate(event), NotifyDeps(store, lambda s, m: None, "https://u/"))
    [stored] = store.items.values()
    assert stored.expires_at == int((NOW + timedelta(seconds=86400)).timestamp())


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_decision_is_passed_once_to_step_functions_audited_and_marked_used(decision: Decision) -> None:
    store = MemoryStore()
    link, _ = issue(store)
    approval_id = parse_qs(urlparse(link).query)["id"][0]
    sent = Sent()

    result = submit_decision(approval_id, decision, APPROVER, NOW, sent.deps(store))

    assert (result.decision, result.decided_by, result.step_weight) == (decision, APPROVER, 50)
    [call] = sent.calls
    if decision == "approve":
        assert call[0] == "success" and f'"approved_by": "{APPROVER}"' in call[2]
    else:
        assert call[0] == "failure" and call[2] == REJECTED_ERROR and APPROVER in call[3]
    [stored] = store.items.values()
    assert (stored.status, stored.decision, stored.decided_by) == ("used", decision, APPROVER)
    [record] = sent.audit
    assert (record.actor, record.action, record.trigger, record.endpoint_name) == (
        "approval",
        decision,
        "llama-q4-v7",
        "manga-chat",
    )
    assert record.after == {
        "rollout_id": "llama-q4-v7",
        "step_weight": 50,
        "decision": decision,
        "decided_by": APPROVER,
        "requested_by": REQUESTER,
    }
    assert record.at == NOW and record.record_id.endswith(f"#approval-{stored.approval_key[:16]}")
    with pytest.raises(ApprovalRefusedError, match="already used"):
        submit_decision(approval_id, "approve", "arn:aws:iam::123456789012:user/mallory", NOW, sent.deps(store))
    assert len(sent.calls) == 1 and len(sent.audit) == 1  # nothing more reached Step Functions or the trail


@pytest.mark.parametrize(
    "caller",
    [REQUESTER, "arn:aws:sts::123456789012:user/ayumi", "arn:aws:iam::123456789012:user/ops/ayumi"],
)
def test_the_requester_may_not_decide_and_nothing_is_claimed_or_sent(caller: str) -> None:
    store = MemoryStore()
    link, _ = issue(store)
    sent = Sent()

    with pytest.raises(ApprovalRefusedError, match="requested rollout llama-q4-v7 and may not decide") as raised:
        submit_decision(parse_qs(urlparse(link).query)["id"][0], "approve", caller, NOW, sent.deps(store))

    assert raised.value.http_status == 403
    [stored] = store.items.values()
    assert stored.status == "pending" and sent.calls == [] and sent.audit == []


def test_a_failed_send_gives_the_claim_back_and_the_decision_can_be_made_again() -> None:
    store = MemoryStore()
    link, _ = issue(store)
    approval_id = parse_qs(urlparse(link).query)["id"][0]
    sent = Sent()
    sent.fail = [ConnectionError("Step Functions unreachable")]

    with pytest.raises(ConnectionError):
        submit_decision(approval_id, "approve", APPROVER, NOW, sent.deps(store))
    [stored] = store.items.values()
    assert (stored.status, stored.decided_by) == ("pending", None) and sent.audit == []

    other = "arn:aws:iam::123456789012:user/hiro"  # anyone but the requester may decide now
    assert submit_decision(approval_id, "reject", other, NOW, sent.deps(store)).decided_by == other
    [stored] = store.items.values()
    assert (stored.status, stored.decision, stored.decided_by) == ("used", "reject", other)
    assert len(sent.audit) == 1


def test_a_task_step_functions_no_longer_waits_for_is_gone_and_not_audited() -> None:
    store = MemoryStore()
    link, _ = issue(store)
    sent = Sent()
    sent.fail = [TaskGoneError("the rollout no longer waits for this decision (timed out or stopped)")]

    with pytest.raises(TaskGoneError):
        submit_decision(parse_qs(urlparse(link).query)["id"][0], "approve", APPROVER, NOW, sent.deps(store))
    assert sent.audit == [] and next(iter(store.items.values())).status == "pending"


def test_a_claim_keeps_other_approvers_out_until_it_lapses_but_lets_its_caller_retry() -> None:
    store = MemoryStore()
    link, _ = issue(store)
    key = next(iter(store.items))
    store.claim(key, "approve", APPROVER, NOW)  # a caller whose send is in flight (or who died mid-send)
    sent = Sent()
    other = "arn:aws:iam::123456789012:user/hiro"

    with pytest.raises(ApprovalRefusedError, match="is submitting 'approve' for this step right now"):
        submit_decision(parse_qs(urlparse(link).query)["id"][0], "reject", other, NOW, sent.deps(store))
    assert submit_for_rollout("llama-q4-v7", "approve", APPROVER, NOW, sent.deps(store)).decided_by == APPROVER

    store = MemoryStore()
    issue(store)
    store.claim(next(iter(store.items)), "approve", APPROVER, NOW)
    later = NOW + timedelta(seconds=CLAIM_SECONDS)
    assert submit_for_rollout("llama-q4-v7", "reject", other, later, sent.deps(store)).decision == "reject"


def test_deciding_by_rollout_id_needs_a_step_that_waits() -> None:
    with pytest.raises(ApprovalRefusedError, match="rollout 'v404' does not wait for an approval now") as raised:
        submit_for_rollout("v404", "approve", APPROVER, NOW, Sent().deps(MemoryStore()))
    assert raised.value.http_status == 404


def test_a_rejection_sends_its_reason_with_who_and_when() -> None:
    store = MemoryStore()
    issue(store)
    sent = Sent()

    submit_for_rollout("llama-q4-v7", "reject", APPROVER, NOW, sent.deps(store), note="p95 TTFT looks worse")

    assert sent.calls == [
        (
            "failure",
            load_event("approval_notify")["task_token"],
            REJECTED_ERROR,
            f"rejected by {APPROVER} at 2026-11-21T10:05:00+00:00: p95 TTFT looks worse",
        )
    ]
    assert sent.audit[0].reason.endswith(": p95 TTFT looks worse")


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        # StartExecution by hand with a requested_by of one's choosing: no request was recorded under its name.
        ({"execution_name": "forged-v8"}, "has no recorded request"),
        # Under a recorded name but with another input (another requester, another model): not that request.
        (
            {"execution_input": load_event("approval_notify")["execution_input"] | {"requested_by": APPROVER}},
            "is not the request recorded under its name",
        ),
    ],
)
def test_an_execution_that_is_not_a_recorded_request_gets_no_approval(changes: dict[str, object], says: str) -> None:
    store = MemoryStore()
    mails: list[str] = []
    request = ApprovalRequest.model_validate(load_event("approval_notify") | {"now": NOW.isoformat()} | changes)
    with pytest.raises(RequesterUnknownError, match=says):
        request_approval(request, NotifyDeps(store, lambda s, m: mails.append(m), "https://u/"))
    assert store.items == {} and mails == []
