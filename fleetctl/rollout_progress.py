"""Where a rollout is: its execution, the state it is in, the canary's step, and the last analysis.

Read from Step Functions (the execution's input and its history); nothing here writes. The request is
the execution's input, so the steps and approval steps come from the same parser the workflow uses.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from fleetctl import awsclients
from fleetctl.errors import CliError, ExitCode

_HISTORY_PAGE = 200


class StepInfo(BaseModel):
    weight: int
    approval: bool


class RolloutProgress(BaseModel):
    """One rollout execution as an operator needs to see it (no task token, no raw input)."""

    rollout_id: str
    execution_arn: str
    endpoint_name: str
    status: str
    started_at: datetime
    stopped_at: datetime | None = None
    state: str | None = None
    step_weight: int | None = None
    steps: list[StepInfo] = []
    waiting_for_approval: bool = False
    last_analysis: str | None = None
    requested_by: str | None = None
    model_version: str | None = None
    error: str | None = None
    cause: str | None = None
    history_unreadable: str | None = None  # why state, step and analysis are unknown (AWS denied the history)


def _json(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _steps(request: dict[str, Any]) -> list[StepInfo]:
    from fleetops.rollout.request_schema import RolloutInputError, parse_request

    try:
        return [StepInfo(weight=s.weight, approval=bool(s.approval)) for s in parse_request(request).step_specs()]
    except (RolloutInputError, ValueError):
        return []


def _from_history(events: list[dict[str, Any]]) -> tuple[str | None, int | None, str | None]:
    """Current state, canary weight and last analysis summary from history events, newest first."""
    state = weight = summary = None
    for event in events:
        entered = event.get("stateEnteredEventDetails")
        exited = event.get("stateExitedEventDetails")
        if entered and state is None:
            state = entered.get("name")
        if entered and weight is None and entered.get("name") == "SetWeights":
            step = _json(entered.get("input")).get("cursor", {}).get("step", {})
            weight = step.get("weight") if isinstance(step.get("weight"), int) else None
        if exited and summary is None and exited.get("name") == "Analyse":
            analysis = _json(exited.get("output")).get("analysis", {})
            summary = analysis.get("summary") if isinstance(analysis, dict) else None
        if state is not None and weight is not None and summary is not None:
            break
    return state, weight, summary


def newest_events(execution_arn: str, limit: int = 1000) -> list[dict[str, Any]]:
    """The execution's history, newest first (the newest ``_HISTORY_PAGE`` where Step Functions reverses it).

    The emulator ignores ``reverseOrder``; then every page is read (up to ``limit`` events) and sorted here.
    """
    sfn = awsclients.client("stepfunctions")
    kwargs: dict[str, Any] = {"executionArn": execution_arn, "reverseOrder": True, "maxResults": _HISTORY_PAGE}
    page = sfn.get_execution_history(**kwargs)
    events: list[dict[str, Any]] = list(page["events"])
    reversed_by_aws = len(events) < 2 or events[0]["id"] > events[-1]["id"]
    while not reversed_by_aws and page.get("nextToken") and len(events) < limit:
        page = sfn.get_execution_history(**kwargs, nextToken=page["nextToken"])
        events += page["events"]
    return sorted(events, key=lambda e: int(e["id"]), reverse=True)


def progress(execution_arn: str, described: dict[str, Any] | None = None) -> RolloutProgress:
    """Describe one rollout execution and read its recent history."""
    sfn = awsclients.client("stepfunctions")
    described = described or sfn.describe_execution(executionArn=execution_arn)
    request = _json(described.get("input"))
    from botocore.exceptions import ClientError

    from fleetctl.aws_errors import denied

    unreadable = None
    try:
        state, weight, summary = _from_history(newest_events(execution_arn))
    except ClientError as exc:
        if (unreadable := denied(exc)) is None:
            raise
        state = weight = summary = None
    model = request.get("model") if isinstance(request.get("model"), dict) else {}
    return RolloutProgress(
        rollout_id=str(described.get("name") or execution_arn.rsplit(":", 1)[-1]),
        execution_arn=execution_arn,
        endpoint_name=str(request.get("endpoint_name", "")),
        status=str(described["status"]),
        started_at=described["startDate"],
        stopped_at=described.get("stopDate"),
        state=state,
        step_weight=weight,
        steps=_steps(request),
        waiting_for_approval=described["status"] == "RUNNING" and state == "RequestApproval",
        last_analysis=summary,
        requested_by=request.get("requested_by"),
        model_version=(model or {}).get("version"),
        error=described.get("error"),
        cause=described.get("cause"),
        history_unreadable=unreadable,
    )


def running(state_machine_arn: str, endpoint_name: str | None) -> list[RolloutProgress]:
    """The rollouts in flight (of ``endpoint_name`` when given), newest first."""
    sfn = awsclients.client("stepfunctions")
    found = []
    kwargs: dict[str, Any] = {"stateMachineArn": state_machine_arn, "statusFilter": "RUNNING"}
    while True:
        page = sfn.list_executions(**kwargs)
        for execution in page["executions"]:
            described = sfn.describe_execution(executionArn=execution["executionArn"])
            if endpoint_name and _json(described.get("input")).get("endpoint_name") != endpoint_name:
                continue
            found.append(progress(execution["executionArn"], described))
        if not page.get("nextToken"):
            return sorted(found, key=lambda p: p.started_at, reverse=True)
        kwargs["nextToken"] = page["nextToken"]


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN of execution ``name`` of a standard state machine (the name is the rollout id)."""
    arn_prefix = state_machine_arn.replace(":stateMachine:", ":execution:", 1)
    return f"{arn_prefix}:{name}"


def find(state_machine_arn: str, rollout_id: str) -> RolloutProgress:
    """The rollout named ``rollout_id`` (its execution name), or a not-found error listing recent ones."""
    from botocore.exceptions import ClientError

    from fleetops.aws.retry import error_code

    sfn = awsclients.client("stepfunctions")
    arn = execution_arn(state_machine_arn, rollout_id)
    try:
        described = sfn.describe_execution(executionArn=arn)
    except ClientError as exc:
        if error_code(exc) not in ("ExecutionDoesNotExist", "InvalidArn"):
            raise
        recent = [
            e["name"] for e in sfn.list_executions(stateMachineArn=state_machine_arn, maxResults=10)["executions"]
        ]
        raise CliError(
            ExitCode.NOT_FOUND,
            f"no rollout {rollout_id!r}",
            f"recent rollouts: {', '.join(recent) or 'none'}; list them with: fleetctl rollout status",
        ) from None
    return progress(arn, dict(described))
