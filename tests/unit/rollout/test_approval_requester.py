"""Who requested a rollout is the signed caller: the request function's core, with no AWS."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetops.rollout.request import RequestDeps, RolloutRequestRefusedError, execution_input, request_rollout
from fleetops.rollout.requester import RolloutRecord
from tests.conftest import load_event

ALICE = "arn:aws:iam::123456789012:user/alice"
NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def body(**changes: Any) -> dict[str, Any]:
    """The sample function URL event's rollout request (events/rollout_request.json), with ``changes``."""
    request: dict[str, Any] = json.loads(load_event("rollout_request")["body"])
    return request | changes


def test_the_signed_caller_becomes_requested_by_and_the_execution_is_named_after_the_rollout() -> None:
    started: list[tuple[str, str]] = []

    def start(name: str, document: str) -> str:
        started.append((name, document))
        return f"arn:aws:states:us-east-1:123456789012:execution:canary-rollout:{name}"

    recorded: list[RolloutRecord] = []

    def record(rollout: RolloutRecord) -> bool:
        assert not started, "the request is recorded before the execution starts"
        recorded.append(rollout)
        return True

    result = request_rollout(body(), ALICE, RequestDeps(record=record, start=start), NOW)

    [(name, document)] = started
    assert name == result.rollout_id == "llama-q4-v7" and result.requested_by == ALICE
    assert json.loads(document) == body() | {"requested_by": ALICE}
    assert result.execution_arn.endswith(":llama-q4-v7")
    [rollout] = recorded
    assert (rollout.approval_key, rollout.requested_by, rollout.execution_input) == (
        "rollout#llama-q4-v7",
        ALICE,
        document,
    )
    assert rollout.expires_at == int(NOW.timestamp()) + 90 * 86400  # as long as Step Functions keeps the name


def test_another_request_recorded_under_the_rollout_id_is_refused_before_anything_starts() -> None:
    started: list[str] = []

    def start(name: str, document: str) -> str:
        started.append(name)
        return f"arn:aws:states:us-east-1:123456789012:execution:canary-rollout:{name}"

    deps = RequestDeps(record=lambda rollout: False, start=start)
    with pytest.raises(RolloutRequestRefusedError, match="requested before with another request") as refused:
        request_rollout(body(), ALICE, deps, NOW)
    assert refused.value.http_status == 409 and started == []


@pytest.mark.parametrize(
    ("sent", "caller", "status", "says"),
    [
        (body(requested_by=ALICE), ALICE, 400, "requested_by may not be set"),
        (body(requested_by="someone-else"), ALICE, 400, "requested_by may not be set"),
        ([1, 2], ALICE, 400, "a JSON object, not list"),
        (body(steps=[50, 25]), ALICE, 400, "steps must strictly increase, got [50, 25]"),
        (body(), "", 403, "no IAM identity"),
    ],
)
def test_a_request_that_cannot_say_who_asked_or_is_invalid_is_refused(
    sent: Any, caller: str, status: int, says: str
) -> None:
    with pytest.raises(RolloutRequestRefusedError) as refused:
        execution_input(sent, caller)
    assert refused.value.http_status == status and says in str(refused.value)
