"""Deploy and run this project's state machines on the emulator (shared by the workflow modules).

A workflow module (:mod:`devtools.bedrock_workflow`, :mod:`devtools.rollout_workflow`) names its
resources and substitutions; creating them the way ``template.yaml`` does, starting executions and
reading what they did is the same for every workflow and lives here once.
"""

from __future__ import annotations

import io
import json
import re
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from devtools.aws_resources import read_inbox

_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def render(asl_text: str, substitutions: dict[str, str]) -> str:
    """Replace every ``${X}``; a placeholder without a value is an error, as in CloudFormation."""
    missing = sorted(set(_PLACEHOLDER.findall(asl_text)) - substitutions.keys())
    if missing:
        raise KeyError(f"no substitution for {missing}")
    return _PLACEHOLDER.sub(lambda m: substitutions[m.group(1)], asl_text)


def create_role(name: str) -> str:
    """An IAM role (the emulator checks no trust policy or permission); returns its ARN."""
    trust = json.dumps({"Version": "2012-10-17", "Statement": []})
    return str(boto3.client("iam").create_role(RoleName=name, AssumeRolePolicyDocument=trust)["Role"]["Arn"])


def _placeholder_code() -> bytes:
    # The code is never run: devtools.lambda_dispatch routes invocations to functions/<folder>/app.py.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "# the emulator dispatches to functions/<folder>/app.py\n")
    return buffer.getvalue()


def create_functions(names: Iterable[str], role_arn: str) -> dict[str, str]:
    """Lambda functions that ASL tasks can invoke by ARN; returns name -> function ARN.

    Their invocations run the project's real handlers once routed with
    :func:`devtools.lambda_dispatch.dispatch_lambdas`.
    """
    awslambda = boto3.client("lambda")
    return {
        name: awslambda.create_function(
            FunctionName=name,
            Runtime="python3.13",
            Role=role_arn,
            Handler="app.lambda_handler",
            Code={"ZipFile": _placeholder_code()},
        )["FunctionArn"]
        for name in names
    }


def create_state_machine(name: str, asl: Path, substitutions: dict[str, str], role_arn: str) -> str:
    """A state machine from the ASL file that ``template.yaml`` deploys, with its ``DefinitionSubstitutions``.

    Returns its ARN.
    """
    return str(
        boto3.client("stepfunctions").create_state_machine(
            name=name, definition=render(asl.read_text(), substitutions), roleArn=role_arn
        )["stateMachineArn"]
    )


def start(arn: str, request: dict[str, Any], name: str) -> str:
    """Start an execution of the state machine ``arn`` with ``request`` as input; returns the execution ARN."""
    return str(
        boto3.client("stepfunctions").start_execution(stateMachineArn=arn, name=name, input=json.dumps(request))[
            "executionArn"
        ]
    )


def wait(execution_arn: str, timeout_s: float = 60) -> dict[str, Any]:
    """Wait (bounded) until the execution is no longer RUNNING; returns its description."""
    sfn = boto3.client("stepfunctions")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            return dict(described)
        time.sleep(0.2)
    raise TimeoutError(f"execution {execution_arn} still RUNNING after {timeout_s}s")


def state_history(execution_arn: str) -> list[str]:
    """Names of the states entered, in order."""
    events = boto3.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]


@dataclass(frozen=True)
class StateVisit:
    """One pass through a state: how long it took and what it left in the execution's data (``None``: it failed)."""

    seconds: float
    output: dict[str, Any] | None


def state_visits(execution_arn: str, name: str) -> list[StateVisit]:
    """Every pass through state ``name``, in order, from the execution's history."""
    events = boto3.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    visits: list[StateVisit] = []
    entered = None
    for event in events:
        if event.get("stateEnteredEventDetails", {}).get("name") == name:
            entered = event["timestamp"]
        elif entered is not None and event.get("stateExitedEventDetails", {}).get("name") == name:
            output = event["stateExitedEventDetails"].get("output")
            visits.append(
                StateVisit((event["timestamp"] - entered).total_seconds(), json.loads(output) if output else None)
            )
            entered = None
        elif entered is not None and event["type"].endswith("Failed") and event["type"] != "ExecutionFailed":
            visits.append(StateVisit((event["timestamp"] - entered).total_seconds(), None))
            entered = None
    return visits


def read_notifications(inbox_url: str, wait_s: float = 0) -> list[dict[str, str]]:
    """Subject and Message of each notification delivered to an inbox since the last read.

    See :func:`devtools.aws_resources.read_inbox` (deletes what it reads, waits up to ``wait_s``).
    """
    return [{"Subject": body.get("Subject", ""), "Message": body["Message"]} for body in read_inbox(inbox_url, wait_s)]
