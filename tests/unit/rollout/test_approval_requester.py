"""Who requested a rollout is the signed caller: the request function's core, with no AWS."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetops.rollout.request import RequestDeps, RolloutRequestRefusedError, execution_input, request_rollout
from tests.conftest import load_event

ALICE = "arn:aws:iam::123456789012:user/alice"


def body(**changes: Any) -> dict[str, Any]:
    """The sample function URL event's rollout request (events/rollout_request.json), with ``changes``."""
    request: dict[str, Any] = json.loads(load_event("rollout_request")["body"])
    return request | changes


def test_the_signed_caller_becomes_requested_by_and_the_execution_is_named_after_the_rollout() -> None:
    started: list[tuple[str, str]] = []

    def start(name: str, document: str) -> str:
        started.append((name, document))
        return f"arn:aws:states:us-east-1:123456789012:execution:canary-rollout:{name}"

    result = request_rollout(body(), ALICE, RequestDeps(start=start))

    [(name, document)] = started
    assert name == result.rollout_id == "llama-q4-v7" and result.requested_by == ALICE
    assert json.loads(document) == body() | {"requested_by": ALICE}
    assert result.execution_arn.endswith(":llama-q4-v7")


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
