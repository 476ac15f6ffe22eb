"""The deployed stack as ``fleetctl`` sees it, on the emulator: resources, an endpoint, and a CloudFormation stack.

``fleetctl --stack NAME`` finds everything from the stack's outputs. Here the workflows and tables are created
the way the tests create them (:func:`devtools.rollout_workflow.deploy`), then a CloudFormation stack whose
``Outputs`` carry those local names, one for every output ``template.yaml`` declares (a test checks the keys
are exactly the template's), and whose ``Parameters`` are the template's own. Tests and ``bench/cli.py`` use it.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import boto3

from devtools import rollout_workflow as wf
from devtools.cfn_yaml import load, parameter_values
from fleetops.aws.autoscaling import DIMENSION, NAMESPACE, resource_id

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
STACK = "manga-llm-fleet"  # devtools.aws_resources' default: its kill switch is /manga-llm-fleet/automation/...
ENDPOINT = "manga-chat-prod"  # the prod endpoint of the shipped fleet.yaml
PARAMETERS = {"EnvironmentName": "prod", "DryRun": "false", "RemediatedEndpointName": ENDPOINT}


# Stand-ins: the emulator checks no permission (template.yaml's RolloutRequesterPolicy and RolloutApproverPolicy
# are the real ones).
_REQUESTER_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "lambda:InvokeFunctionUrl", "Resource": "*"}],
}
_APPROVER_POLICY = _REQUESTER_POLICY
#: The functions behind the stack's IAM-authorised URLs (template.yaml: FunctionUrlConfig AuthType AWS_IAM).
URL_FUNCTIONS = ("rollout_request", "approval_endpoint")


@dataclass(frozen=True)
class OperatorStack:
    name: str
    workflow: wf.RolloutWorkflow
    outputs: dict[str, str]
    parameters: dict[str, str]


def local_outputs(
    workflow: wf.RolloutWorkflow, stack: str = STACK, urls: dict[str, str] | None = None
) -> dict[str, str]:
    """Every output of ``template.yaml`` with the name of its emulated stand-in (made here when it is cheap).

    ``urls``: the local function URLs (:func:`devtools.function_url.serve` of :data:`URL_FUNCTIONS`); without
    them the outputs name URLs nothing answers.
    """
    core = workflow.environment
    urls = urls or {}
    iam = boto3.client("iam")
    policy = iam.create_policy(PolicyName=f"{stack}-rollout-approver", PolicyDocument=json.dumps(_APPROVER_POLICY))[
        "Policy"
    ]["Arn"]
    requester = iam.create_policy(
        PolicyName=f"{stack}-rollout-requester", PolicyDocument=json.dumps(_REQUESTER_POLICY)
    )["Policy"]["Arn"]
    bucket = f"{stack}-model-artifacts"
    boto3.client("s3").create_bucket(Bucket=bucket)
    region = boto3.session.Session().region_name
    return {
        "CalendarTableName": core["CALENDAR_TABLE"],
        "AuditTableName": workflow.audit_table,
        "KillSwitchParameterName": core["KILL_SWITCH_PARAMETER"],
        "OperationsTopicArn": workflow.topic_arn,
        "CanaryRolloutStateMachineArn": workflow.rollout_arn,
        "RollbackStateMachineArn": workflow.rollback_arn,
        "ApprovalEndpointUrl": urls.get("approval_endpoint", wf.APPROVAL_URL),
        "RolloutApproverPolicyArn": str(policy),
        "RolloutRequestUrl": urls.get("rollout_request", wf.REQUEST_URL),
        "RolloutRequesterPolicyArn": str(requester),
        # The Bedrock import workflow is not deployed here (devtools.bedrock_workflow does that for its tests).
        "BedrockImportStateMachineArn": f"arn:aws:states:{region}:123456789012:stateMachine:{stack}-bedrock-import",
        "ModelArtifactBucketName": bucket,
        "LeaseTableName": workflow.lease_table,
        "ApprovalTableName": workflow.approval_table,
        "ModelPointerPrefix": wf.POINTER_PREFIX,
        "RemediationAlarmPrefix": f"{stack}-remediation-",
    }


def create_stack(outputs: dict[str, str], parameters: dict[str, str], stack: str = STACK) -> None:
    """A CloudFormation stack on the emulator that declares the template's parameters and carries ``outputs``."""
    declared = load(TEMPLATE)["Parameters"]
    body = {
        "Parameters": {name: {"Type": "String"} for name in declared},
        # moto needs a resource; it only warns that it does not create this type.
        "Resources": {"Placeholder": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    values = parameter_values(load(TEMPLATE), parameters)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Tried to parse AWS::CloudFormation::WaitConditionHandle")
        boto3.client("cloudformation").create_stack(
            StackName=stack,
            TemplateBody=json.dumps(body),
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in values.items()],
        )


def create_endpoint(name: str = ENDPOINT, instances: int = 4, min_capacity: int = 4, max_capacity: int = 12) -> None:
    """An InService endpoint with one ``primary`` variant registered with Application Auto Scaling."""
    wf.create_endpoint(name=name, instance_count=instances)
    boto3.client("application-autoscaling").register_scalable_target(
        ServiceNamespace=NAMESPACE,
        ResourceId=resource_id(name, wf.PRIMARY),
        ScalableDimension=DIMENSION,
        MinCapacity=min_capacity,
        MaxCapacity=max_capacity,
    )


def deploy(
    parameters: dict[str, str] | None = None, stack: str = STACK, urls: dict[str, str] | None = None
) -> OperatorStack:
    """Everything ``fleetctl --stack`` reads, on a freshly reset emulator, with the endpoint ``manga-chat-prod``.

    ``urls``: the local function URLs the stack's outputs name (see :func:`local_outputs`).
    """
    workflow = wf.deploy()
    values = PARAMETERS | (parameters or {})
    outputs = local_outputs(workflow, stack, urls)
    create_stack(outputs, values, stack)
    create_endpoint(values["RemediatedEndpointName"])
    return OperatorStack(name=stack, workflow=workflow, outputs=outputs, parameters=values)
