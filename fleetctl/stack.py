"""The deployed stack: its resources by output key (template.yaml's ``Outputs``) and its parameters.

``--stack`` names it; nothing else needs a table name or an ARN. :func:`from_description` is pure
(``DescribeStacks``' answer in, :class:`Stack` out); :func:`resolve` makes the one AWS call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetctl import awsclients
from fleetctl.errors import CliError, ExitCode

# The outputs fleetctl reads; a test checks each is declared in template.yaml.
AUDIT_TABLE = "AuditTableName"
CALENDAR_TABLE = "CalendarTableName"
LEASE_TABLE = "LeaseTableName"
APPROVAL_TABLE = "ApprovalTableName"
KILL_SWITCH = "KillSwitchParameterName"
MODEL_POINTER_PREFIX = "ModelPointerPrefix"
ALARM_PREFIX = "RemediationAlarmPrefix"
ROLLOUT_STATE_MACHINE = "CanaryRolloutStateMachineArn"
ROLLBACK_STATE_MACHINE = "RollbackStateMachineArn"
ROLLOUT_REQUEST_URL = "RolloutRequestUrl"
APPROVAL_URL = "ApprovalEndpointUrl"
OUTPUTS_READ = (
    AUDIT_TABLE,
    CALENDAR_TABLE,
    LEASE_TABLE,
    APPROVAL_TABLE,
    KILL_SWITCH,
    MODEL_POINTER_PREFIX,
    ALARM_PREFIX,
    ROLLOUT_STATE_MACHINE,
    ROLLBACK_STATE_MACHINE,
    ROLLOUT_REQUEST_URL,
    APPROVAL_URL,
)

# The parameters fleetctl reads (template.yaml's ``Parameters``).
ENVIRONMENT = "EnvironmentName"
DRY_RUN = "DryRun"
REMEDIATED_ENDPOINT = "RemediatedEndpointName"
CANARY_VARIANT = "CanaryVariantName"
PARAMETERS_READ = (ENVIRONMENT, DRY_RUN, REMEDIATED_ENDPOINT, CANARY_VARIANT)


@dataclass(frozen=True)
class Stack:
    """One deployed stack of this project."""

    name: str
    region: str
    status: str
    outputs: Mapping[str, str] = field(default_factory=dict)
    parameters: Mapping[str, str] = field(default_factory=dict)

    def output(self, key: str) -> str:
        """The value of output ``key``; a stack deployed before that output existed gets told to redeploy."""
        value = self.outputs.get(key)
        if not value:
            raise CliError(
                ExitCode.NOT_FOUND,
                f"stack {self.name!r} has no output {key!r}",
                "deploy the current template (sam deploy) so that the stack declares it",
            )
        return value

    @property
    def environment(self) -> str | None:
        return self.parameters.get(ENVIRONMENT) or None

    @property
    def dry_run(self) -> bool:
        return self.parameters.get(DRY_RUN, "false").strip().lower() == "true"

    @property
    def default_endpoint(self) -> str | None:
        return self.parameters.get(REMEDIATED_ENDPOINT) or None

    @property
    def canary_variant(self) -> str:
        return self.parameters.get(CANARY_VARIANT) or "canary"


def from_description(described: Mapping[str, Any], region: str) -> Stack:
    """A :class:`Stack` from one entry of ``DescribeStacks``' ``Stacks``.

    Examples
    --------
    >>> s = from_description({"StackName": "fleet", "StackStatus": "CREATE_COMPLETE",
    ...     "Outputs": [{"OutputKey": "AuditTableName", "OutputValue": "fleet-audit"}],
    ...     "Parameters": [{"ParameterKey": "DryRun", "ParameterValue": "true"}]}, "us-east-1")
    >>> s.output("AuditTableName"), s.dry_run
    ('fleet-audit', True)
    """
    return Stack(
        name=str(described["StackName"]),
        region=region,
        status=str(described.get("StackStatus", "")),
        outputs={str(o["OutputKey"]): str(o.get("OutputValue", "")) for o in described.get("Outputs", [])},
        parameters={str(p["ParameterKey"]): str(p.get("ParameterValue", "")) for p in described.get("Parameters", [])},
    )


def resolve(name: str | None) -> Stack:
    """Describe the stack ``name`` (``--stack`` or ``FLEETCTL_STACK``).

    Raises
    ------
    CliError
        No name given (usage), or no such stack in this region (not found); AWS errors pass through.
    """
    from botocore.exceptions import ClientError

    if not name:
        raise CliError(
            ExitCode.USAGE,
            "no stack named",
            "pass --stack NAME or set FLEETCTL_STACK (samconfig.toml's stack_name, e.g. manga-llm-fleet-prod)",
        )
    region = awsclients.region()
    try:
        answer = awsclients.client("cloudformation").describe_stacks(StackName=name)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message", "")):
            raise CliError(
                ExitCode.NOT_FOUND,
                f"stack {name!r} does not exist in {region}",
                "check --stack and --region; list stacks with: aws cloudformation list-stacks "
                "--stack-status-filter CREATE_COMPLETE UPDATE_COMPLETE",
            ) from None
        raise
    return from_description(answer["Stacks"][0], region or "")
