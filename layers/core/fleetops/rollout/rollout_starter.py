"""Step Functions adapter: start the rollout execution named after its rollout id, idempotently."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from fleetops.aws import clients
from fleetops.aws.retry import error_code
from fleetops.rollout.request import RolloutRequestRefusedError, same_input

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN an execution ``name`` of ``state_machine_arn`` has (or would have).

    Examples
    --------
    >>> execution_arn("arn:aws:states:us-east-1:123456789012:stateMachine:fleet-canary-rollout", "v7")
    'arn:aws:states:us-east-1:123456789012:execution:fleet-canary-rollout:v7'
    """
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"


class RolloutStarter:
    """Step Functions never answers "update in progress": botocore's standard retry mode is the only retry."""

    def __init__(self, state_machine_arn: str, client: SFNClient | None = None) -> None:
        self._machine = state_machine_arn
        self._client: SFNClient = client or clients.client("stepfunctions")

    def start(self, name: str, document: str) -> str:
        """Start execution ``name``; a repeat with the same input (running or ended) is that execution.

        Raises
        ------
        RolloutRequestRefusedError
            409: an execution of that name exists with another input.
        """
        try:
            return self._client.start_execution(stateMachineArn=self._machine, name=name, input=document)[
                "executionArn"
            ]
        except ClientError as exc:
            if error_code(exc) != "ExecutionAlreadyExists":
                raise
        arn = execution_arn(self._machine, name)
        if same_input(self._client.describe_execution(executionArn=arn).get("input", ""), document):
            return arn
        raise RolloutRequestRefusedError(
            409,
            f"rollout {name!r} was requested before with another request (or by someone else); "
            "give the new rollout its own rollout_id",
        )
