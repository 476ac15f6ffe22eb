"""``fleetctl rollout`` and ``rollback``: start, follow, decide and undo, through the stack's own workflows.

Nothing here changes an endpoint itself. A rollout is the canary workflow's execution (named after its
rollout id). start POSTs the request to the stack's rollout request URL and approve/reject POST the decision
to its approval URL, both SigV4-signed as the caller: the functions behind them take who requested and who
decided from the signature (the requester may not approve), so fleetctl never says who the caller is and
never sees a task token. abort and rollback start the rollback workflow, which takes the rollout's lease
over, stops it and returns the endpoint (``abort_only`` for an abort: a promotion is never undone).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from fleetctl import awsclients, endpoints
from fleetctl.errors import CliError, ExitCode
from fleetctl.rollout_progress import RolloutProgress, find, newest_events, progress, running
from fleetctl.signed_http import post_json
from fleetctl.stack import (
    APPROVAL_TABLE,
    APPROVAL_URL,
    ROLLBACK_STATE_MACHINE,
    ROLLOUT_REQUEST_URL,
    ROLLOUT_STATE_MACHINE,
    Stack,
)

_POLL_S = 1.0
T = TypeVar("T")


class PendingApproval(BaseModel):
    step_weight: int
    expires_at: datetime
    summary: str


class RolloutDetail(BaseModel):
    rollout: RolloutProgress
    pending_approval: PendingApproval | None
    approval_unreadable: str | None = None  # why a pending approval is unknown (AWS denied the approval table)


class RolloutList(BaseModel):
    stack: str
    running: list[RolloutProgress]
    recent: list[dict[str, str]]


class Decision(BaseModel):
    rollout_id: str
    endpoint_name: str
    step_weight: int
    decision: str
    decided_by: str
    rollout: RolloutProgress


class RollbackRun(BaseModel):
    rollback_id: str
    execution_arn: str
    endpoint_name: str
    status: str
    state: str | None
    error: str | None
    cause: str | None
    aborted_rollout: str | None


def _sfn() -> Any:
    return awsclients.client("stepfunctions")


def _pending(stack: Stack, rollout_id: str, now: datetime) -> PendingApproval | None:
    from fleetops.rollout.approval_table import ApprovalTable

    table = ApprovalTable(stack.output(APPROVAL_TABLE), resource=awsclients.dynamodb_resource())
    for record in table.pending(rollout_id):
        if record.expires_at > int(now.timestamp()):
            return PendingApproval(
                step_weight=record.step_weight,
                expires_at=datetime.fromtimestamp(record.expires_at, tz=UTC),
                summary=record.summary,
            )
    return None


def detail(stack: Stack, rollout_id: str) -> RolloutDetail:
    from botocore.exceptions import ClientError

    from fleetctl.aws_errors import denied

    found = find(stack.output(ROLLOUT_STATE_MACHINE), rollout_id)
    pending, unreadable = None, None
    try:
        pending = _pending(stack, rollout_id, datetime.now(UTC)) if found.status == "RUNNING" else None
    except ClientError as exc:
        if (unreadable := denied(exc)) is None:
            raise
    return RolloutDetail(rollout=found, pending_approval=pending, approval_unreadable=unreadable)


def listing(stack: Stack) -> RolloutList:
    machine = stack.output(ROLLOUT_STATE_MACHINE)
    recent = _sfn().list_executions(stateMachineArn=machine, maxResults=5)["executions"]
    return RolloutList(
        stack=stack.name,
        running=running(machine, None),
        recent=[{"rollout_id": e["name"], "status": e["status"]} for e in recent],
    )


def start(stack: Stack, request: dict[str, Any]) -> RolloutProgress:
    """Validate the request as the workflow's first step will, then POST it to the stack's request URL."""
    from fleetops.rollout.request import REQUESTER_FIELD
    from fleetops.rollout.request_schema import RolloutInputError, parse_request

    if REQUESTER_FIELD in request:
        raise CliError(
            ExitCode.USAGE,
            f"the rollout request sets {REQUESTER_FIELD}: it is taken from your signed AWS identity",
            f"remove {REQUESTER_FIELD} from the request file and start again",
        )
    try:
        parse_request(request)  # its form only: requested_by is added by the request function
    except RolloutInputError as exc:
        raise CliError(
            ExitCode.USAGE,
            f"the rollout request is invalid (the workflow's Validate step would refuse it):\n    {exc}",
            "fix the request file (README, Operate: the request's fields) and start again",
        ) from None
    rollout_id = str(request.get("rollout_id"))
    started = post_json(
        stack.output(ROLLOUT_REQUEST_URL),
        request,
        f"the rollout request {rollout_id!r}",
        f"give a new rollout its own rollout_id, or follow this one: fleetctl rollout status {rollout_id}",
    )
    return progress(str(started["execution_arn"]))


def _now_running(found: RolloutProgress) -> None:
    if found.status != "RUNNING":
        raise CliError(
            ExitCode.CONFLICT,
            f"rollout {found.rollout_id!r} is {found.status}: nothing waits for a decision",
            f"see how it ended: fleetctl rollout status {found.rollout_id}",
        )


def decide(stack: Stack, rollout_id: str, approve: bool, note: str = "") -> Decision:
    """Approve or reject the step the rollout waits at through the approval URL, as the signed caller."""
    machine = stack.output(ROLLOUT_STATE_MACHINE)
    found = find(machine, rollout_id)
    _now_running(found)
    decided = post_json(
        stack.output(APPROVAL_URL),
        {"rollout_id": rollout_id, "decision": "approve" if approve else "reject", "note": note},
        f"the {'approval' if approve else 'rejection'} of rollout {rollout_id!r}",
        f"see where it is: fleetctl rollout status {rollout_id}",
    )
    return Decision(
        rollout_id=str(decided["rollout_id"]),
        endpoint_name=str(decided["endpoint_name"]),
        step_weight=int(decided["step_weight"]),
        decision=str(decided["decision"]),
        decided_by=str(decided["decided_by"]),
        rollout=progress(found.execution_arn),
    )


def _start_rollback(stack: Stack, request: dict[str, Any]) -> str:
    from botocore.exceptions import ClientError

    from fleetops.aws.retry import error_code
    from fleetops.rollout.rollback import RollbackRequest

    try:
        RollbackRequest.model_validate(request)
    except ValueError as exc:
        raise CliError(ExitCode.USAGE, f"the rollback request is invalid: {exc}", "check the flags") from None
    machine = stack.output(ROLLBACK_STATE_MACHINE)
    name = str(request["rollback_id"])
    try:
        return str(
            _sfn().start_execution(stateMachineArn=machine, name=name, input=json.dumps(request))["executionArn"]
        )
    except ClientError as exc:
        if error_code(exc) != "ExecutionAlreadyExists":
            raise
        raise CliError(
            ExitCode.CONFLICT,
            f"a rollback named {name!r} was started before with another request",
            "wait a second and run the command again (rollback ids carry the time)",
        ) from None


def rollback_run(execution_arn: str, request: dict[str, Any], aborted: str | None) -> RollbackRun:
    sfn = _sfn()
    described = sfn.describe_execution(executionArn=execution_arn)
    events = newest_events(execution_arn)
    state = next((e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e), None)
    return RollbackRun(
        rollback_id=str(request["rollback_id"]),
        execution_arn=execution_arn,
        endpoint_name=str(request["endpoint_name"]),
        status=str(described["status"]),
        state=state,
        error=described.get("error"),
        cause=described.get("cause"),
        aborted_rollout=aborted,
    )


def abort(stack: Stack, rollout_id: str, reason: str, requested_by: str, now: datetime) -> tuple[str, dict[str, Any]]:
    """Start the rollback workflow in abort-only mode for a rollout in flight; returns its execution and input."""
    found = find(stack.output(ROLLOUT_STATE_MACHINE), rollout_id)
    if found.status != "RUNNING":
        raise CliError(
            ExitCode.CONFLICT,
            f"rollout {rollout_id!r} is {found.status}, not in flight: there is nothing to abort",
            f"to undo a promoted version: fleetctl rollback {found.endpoint_name} --reason ...",
        )
    described = _sfn().describe_execution(executionArn=found.execution_arn)
    canary = json.loads(described.get("input") or "{}").get("canary", {})
    request = {
        "endpoint_name": found.endpoint_name,
        "rollback_id": f"{rollout_id}-abort-{now:%Y%m%dT%H%M%S}",
        "canary_variant_name": canary.get("variant_name") or stack.canary_variant,
        "abort_only": True,
        "reason": reason,
        "requested_by": requested_by,
    }
    return _start_rollback(stack, request), request


def rollback(
    stack: Stack, endpoint_name: str, reason: str, requested_by: str, now: datetime
) -> tuple[str, dict[str, Any]]:
    """Start the rollback workflow for an endpoint; returns its execution and input.

    It names no target: the workflow derives it (the rollout's lease row, else the model pointer's previous
    config) and refuses a request that names one.
    """
    endpoints.read(endpoint_name, stack)  # a clear "does not exist" before anything starts
    request: dict[str, Any] = {
        "endpoint_name": endpoint_name,
        "rollback_id": f"ops-{endpoint_name}-{now:%Y%m%dT%H%M%S}"[:80],
        "canary_variant_name": stack.canary_variant,
        "reason": reason,
        "requested_by": requested_by,
    }
    return _start_rollback(stack, request), request


def follow(
    describe: Callable[[], T],
    stage: Callable[[T], str],
    done: Callable[[T], bool],
    update: Callable[[str], None],
    timeout_s: float,
    what: str,
    hint: str,
) -> T:
    """Poll until ``done``; each poll's ``stage`` goes to ``update`` (the progress line)."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = describe()
        update(stage(current))
        if done(current):
            return current
        if time.monotonic() >= deadline:
            raise CliError(ExitCode.TIMEOUT, f"{what} is still running after {timeout_s:g} s ({stage(current)})", hint)
        time.sleep(_POLL_S)
