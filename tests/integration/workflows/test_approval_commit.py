"""A decision is committed only after Step Functions took it: the approval table's claim, release and complete
on the emulator's DynamoDB, the audit record in its audit table.

Step Functions' answers to SendTaskSuccess/SendTaskFailure come from a test double at botocore's wire
(``tests.aws_wire.ScriptedSends``): throttling and a task that timed out cannot be produced on demand by the
emulator, and an answer given there is retried and parsed by botocore exactly as AWS's would be.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from devtools import rollout_workflow as wf
from devtools.aws_resources import create_table
from devtools.lambda_dispatch import FakeLambdaContext, cold_start_environment, load_handler_module
from fleetops.aws.audit_table import AuditTable
from fleetops.aws.clients import CONFIG, MAX_ATTEMPTS
from fleetops.rollout.approval import CLAIM_SECONDS, ApprovalRecord, ApprovalRefusedError
from fleetops.rollout.approval_gate import AUDIT_ACTOR, DecideDeps, TaskGoneError, decide
from fleetops.rollout.approval_table import ApprovalTable
from fleetops.rollout.task_callback import TaskCallback
from fleetops.tables import APPROVAL_PK, AUDIT_PK, AUDIT_SK
from tests.aws_wire import THROTTLED, Answer, ScriptedSends, json_error, skip_backoff

NOW = datetime.now(UTC).replace(microsecond=0)
KEY = "a" * 64
TOKEN = "token-of-a-waiting-task"
ALICE = "arn:aws:iam::123456789012:user/alice"  # requested the rollout
BOB = "arn:aws:iam::123456789012:user/bob"
CAROL = "arn:aws:sts::123456789012:assumed-role/Approvers/carol"
ACCEPTED: Answer = (200, {})  # SendTaskSuccess / SendTaskFailure answer an empty object


@pytest.fixture
def tables() -> tuple[ApprovalTable, AuditTable]:
    approvals = ApprovalTable(create_table("approvals", APPROVAL_PK))
    approvals.put(
        ApprovalRecord(
            approval_key=KEY,
            task_token=TOKEN,
            rollout_id="v7",
            endpoint_name="manga-chat",
            step_weight=25,
            summary="PASS",
            expires_at=int((NOW + timedelta(hours=1)).timestamp()),
            requested_by=ALICE,
        )
    )
    return approvals, AuditTable(create_table("audit", AUDIT_PK, AUDIT_SK))


def deps(tables: tuple[ApprovalTable, AuditTable], *operations: tuple[str, ScriptedSends]) -> DecideDeps:
    client = boto3.client("stepfunctions", config=CONFIG)
    for operation, sends in operations:
        sends.attach(client, operation)
    approvals, audit = tables
    return TaskCallback(client=client).decide_deps(approvals, audit.write)


def test_a_send_that_keeps_failing_gives_the_claim_back_and_a_retry_commits_once(
    tables: tuple[ApprovalTable, AuditTable], monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_backoff(monkeypatch)
    sends = ScriptedSends([THROTTLED] * MAX_ATTEMPTS, rest=ACCEPTED)  # botocore retries, then gives the error up
    approvals, audit = tables

    with pytest.raises(ClientError, match="ThrottlingException"):
        decide(KEY, "approve", BOB, NOW, deps(tables, ("SendTaskSuccess", sends)))

    after_failure = approvals.get(KEY)
    assert after_failure is not None
    assert (after_failure.status, after_failure.decided_by, after_failure.claimed_until) == ("pending", None, None)
    assert audit.list("manga-chat") == [] and sends.sends == MAX_ATTEMPTS

    # Nothing was lost: the decision is made again (here by someone else) and committed.
    result = decide(KEY, "approve", CAROL, NOW, deps(tables, ("SendTaskSuccess", sends)))

    assert result.decided_by == CAROL and sends.sends == MAX_ATTEMPTS + 1 and sends.bodies[-1]["taskToken"] == TOKEN
    used = approvals.get(KEY)
    assert used is not None and (used.status, used.decision, used.decided_by) == ("used", "approve", CAROL)
    [record] = audit.list("manga-chat")
    assert (record.actor, record.action, record.trigger) == (AUDIT_ACTOR, "approve", "v7")
    assert record.after is not None and (record.after["decided_by"], record.after["step_weight"]) == (CAROL, 25)
    with pytest.raises(ApprovalRefusedError, match=f"already used: approve by {CAROL}"):
        decide(KEY, "reject", BOB, NOW, deps(tables, ("SendTaskFailure", sends)))
    assert sends.sends == MAX_ATTEMPTS + 1


def test_a_task_step_functions_no_longer_waits_for_is_gone_and_nothing_is_recorded(
    tables: tuple[ApprovalTable, AuditTable],
) -> None:
    sends = ScriptedSends([json_error("TaskTimedOut", "Task Timed Out")])
    approvals, audit = tables

    with pytest.raises(TaskGoneError, match="no longer waits"):
        decide(KEY, "reject", BOB, NOW, deps(tables, ("SendTaskFailure", sends)))

    stored = approvals.get(KEY)
    assert stored is not None and stored.status == "pending" and audit.list("manga-chat") == []


def test_a_retry_after_a_timeout_between_send_and_audit_still_audits_the_decision(
    tables: tuple[ApprovalTable, AuditTable],
) -> None:
    """Bob's approval reached Step Functions, then the function timed out before the audit (his claim is left).
    He clicks again: the task is gone because his own send took it, so he sees his approval recorded, and the
    audit trail has it, instead of an error and a decision nobody can find."""
    approvals, audit = tables
    approvals.claim(KEY, "approve", BOB, NOW)  # the first attempt: claimed, sent, then stopped
    sends = ScriptedSends([json_error("TaskTimedOut", "Task Timed Out")])

    result = decide(KEY, "approve", BOB, NOW, deps(tables, ("SendTaskSuccess", sends)))

    assert (result.decision, result.decided_by) == ("approve", BOB)
    used = approvals.get(KEY)
    assert used is not None and (used.status, used.decided_by) == ("used", BOB)
    [record] = audit.list("manga-chat")
    assert (record.action, record.outcome) == ("approve", "applied")
    assert "sent by an earlier attempt that stopped before its audit" in record.reason, record.reason


def test_a_task_gone_under_someone_elses_lapsed_claim_is_still_refused(
    tables: tuple[ApprovalTable, AuditTable],
) -> None:
    """Only the caller's own earlier claim counts as its send: Carol taking over Bob's lapsed claim when the task
    has timed out is told so, and nothing is recorded."""
    approvals, audit = tables
    approvals.claim(KEY, "approve", BOB, NOW - timedelta(seconds=CLAIM_SECONDS + 1))
    sends = ScriptedSends([json_error("TaskTimedOut", "Task Timed Out")])

    with pytest.raises(TaskGoneError, match="no longer waits"):
        decide(KEY, "approve", CAROL, NOW, deps(tables, ("SendTaskSuccess", sends)))

    stored = approvals.get(KEY)
    assert stored is not None and stored.status == "pending" and audit.list("manga-chat") == []


def test_a_claim_is_one_callers_until_it_lapses(tables: tuple[ApprovalTable, AuditTable]) -> None:
    approvals, _ = tables
    claimed = approvals.claim(KEY, "approve", BOB, NOW)
    assert (claimed.status, claimed.decided_by, claimed.task_token) == ("claimed", BOB, TOKEN)

    for caller, decision in ((CAROL, "approve"), (BOB, "reject")):
        with pytest.raises(ApprovalRefusedError, match=f"{BOB} is submitting 'approve'") as refused:
            approvals.claim(KEY, decision, caller, NOW)  # type: ignore[arg-type]
        assert refused.value.http_status == 409
    assert approvals.claim(KEY, "approve", BOB, NOW).decided_by == BOB  # the same caller retrying
    assert [r.approval_key for r in approvals.pending("v7")] == [KEY]  # still waiting for Step Functions

    lapsed = NOW + timedelta(seconds=CLAIM_SECONDS)
    assert approvals.claim(KEY, "reject", CAROL, lapsed).decided_by == CAROL
    approvals.release(KEY, BOB)  # not Bob's any more: nothing happens
    stored = approvals.get(KEY)
    assert stored is not None and (stored.status, stored.decided_by) == ("claimed", CAROL)


def test_an_expired_approval_cannot_be_claimed(tables: tuple[ApprovalTable, AuditTable]) -> None:
    approvals, _ = tables
    with pytest.raises(ApprovalRefusedError, match="expired") as refused:
        approvals.claim(KEY, "approve", BOB, NOW + timedelta(hours=1))
    assert refused.value.http_status == 410


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("not json", "the body is a JSON object with rollout_id and decision"),
        ({"decision": "approve"}, "the body is a JSON object with rollout_id and decision"),
        ({"rollout_id": "v7", "decision": "maybe"}, "decision must be approve or reject"),
        ({"rollout_id": "v7", "decision": "reject", "note": "x" * 2001}, "note must be text of at most 2000"),
    ],
)
def test_a_malformed_decision_is_refused_before_anything_is_read(
    tables: tuple[ApprovalTable, AuditTable], body: Any, says: str
) -> None:
    event = wf.url_event("POST", wf.APPROVAL_URL, BOB, json_body=body)
    if isinstance(body, str):
        event["body"] = body

    # A cold start with this test's tables, dropped afterwards: later tests' handlers read their own.
    with cold_start_environment({"APPROVAL_TABLE": "approvals", "AUDIT_TABLE": "audit"}, ["approval_endpoint"]):
        handler = load_handler_module("approval_endpoint").lambda_handler
        answer = handler(event, FakeLambdaContext("approval-endpoint"))

    assert answer["statusCode"] == 400 and says in json.loads(answer["body"])["message"]
    stored = tables[0].get(KEY)
    assert stored is not None and stored.status == "pending"
