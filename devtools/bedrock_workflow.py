"""Deploy and run the Bedrock import workflow on the emulator (integration tests and the demo).

What ``template.yaml`` creates on AWS is created here on the moto server: the artifact bucket, the
registry table (keys from :mod:`fleetops.tables`), the two Lambda functions (their invocations run the
project's real handlers through :mod:`devtools.lambda_dispatch`) and the state machine, created from
``statemachines/bedrock_import.asl.json`` with the same substitution names as the template.
"""

from __future__ import annotations

import io
import json
import re
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from devtools import emulator_extensions
from devtools.aws_resources import create_core_resources
from devtools.emulator import ACCOUNT_ID, REGION
from devtools.lambda_dispatch import dispatch_lambdas
from fleetops.tables import REGISTRY_PK, REGISTRY_SK

REPO = Path(__file__).resolve().parents[1]
ASL = REPO / "statemachines" / "bedrock_import.asl.json"
ARTIFACT_BUCKET = "manga-llm-fleet-artifacts"  # the bucket events/bedrock_validate_artifacts.json names
ARTIFACT_ROOT = f"s3://{ARTIFACT_BUCKET}/bedrock-imports/"
FUNCTIONS = {"bedrock-validate-artifacts": "bedrock_validate_artifacts", "bedrock-smoke-test": "bedrock_smoke_test"}
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")

#: A minimal Llama-class Hugging Face folder (sizes in bytes); the weights are placeholders, not a model.
LLAMA_FILES: dict[str, bytes] = {
    "config.json": json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}).encode(),
    "tokenizer_config.json": b'{"chat_template": "{{ messages }}"}',
    "tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE"}}',
    "model-00001-of-00002.safetensors": b"\0" * 2048,
    "model-00002-of-00002.safetensors": b"\0" * 1024,
}


@dataclass(frozen=True)
class ImportWorkflow:
    state_machine_arn: str
    registry_table: str
    topic_arn: str
    notifications_queue_url: str
    environment: dict[str, str]


def render(asl_text: str, substitutions: dict[str, str]) -> str:
    """Replace every ``${X}``; a placeholder without a value is an error, as in CloudFormation."""
    missing = sorted(set(_PLACEHOLDER.findall(asl_text)) - substitutions.keys())
    if missing:
        raise KeyError(f"no substitution for {missing}")
    return _PLACEHOLDER.sub(lambda m: substitutions[m.group(1)], asl_text)


def upload_artifacts(prefix: str, files: dict[str, bytes]) -> str:
    """Put a model folder under the artifact root; returns its ``s3://`` URI."""
    s3 = boto3.client("s3")
    for name, body in files.items():
        s3.put_object(Bucket=ARTIFACT_BUCKET, Key=f"bedrock-imports/{prefix}{name}", Body=body)
    return f"{ARTIFACT_ROOT}{prefix}"


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "# the emulator dispatches to functions/<folder>/app.py\n")
    return buffer.getvalue()


def deploy() -> ImportWorkflow:
    """Create the workflow's resources on the (freshly reset) emulator."""
    emulator_extensions.install()
    core = create_core_resources()
    boto3.client("s3").create_bucket(Bucket=ARTIFACT_BUCKET)
    registry = "manga-llm-fleet-model-registry"
    boto3.client("dynamodb").create_table(
        TableName=registry,
        KeySchema=[
            {"AttributeName": REGISTRY_PK, "KeyType": "HASH"},
            {"AttributeName": REGISTRY_SK, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": REGISTRY_PK, "AttributeType": "S"},
            {"AttributeName": REGISTRY_SK, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    iam = boto3.client("iam")
    trust = json.dumps({"Version": "2012-10-17", "Statement": []})
    lambda_role = iam.create_role(RoleName="bedrock-import-functions", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    import_role = iam.create_role(RoleName="bedrock-import", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    sfn_role = iam.create_role(RoleName="bedrock-import-states", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    awslambda = boto3.client("lambda")
    arns = {
        name: awslambda.create_function(
            FunctionName=name,
            Runtime="python3.13",
            Role=lambda_role,
            Handler="app.lambda_handler",
            Code={"ZipFile": _zip()},
        )["FunctionArn"]
        for name in FUNCTIONS
    }
    definition = render(
        ASL.read_text(),
        {
            "ValidateArtifactsFunctionArn": arns["bedrock-validate-artifacts"],
            "SmokeTestFunctionArn": arns["bedrock-smoke-test"],
            "ImportRoleArn": import_role,
            "ModelRegistryTableName": registry,
            "OperationsTopicArn": core.topic_arn,
        },
    )
    machine = boto3.client("stepfunctions").create_state_machine(
        name="bedrock-import", definition=definition, roleArn=sfn_role
    )["stateMachineArn"]
    # Notifications are read back through an SQS subscription, as an operator's mail would arrive.
    sqs = boto3.client("sqs")
    queue_url = sqs.create_queue(QueueName="operations-inbox")["QueueUrl"]
    queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:operations-inbox"
    boto3.client("sns").subscribe(TopicArn=core.topic_arn, Protocol="sqs", Endpoint=queue_arn)
    env = core.environment() | {"ARTIFACT_ROOT": ARTIFACT_ROOT}
    return ImportWorkflow(machine, registry, core.topic_arn, queue_url, env)


@contextmanager
def handlers() -> Iterator[None]:
    """Route the workflow's Lambda invocations to the project's real handlers."""
    with dispatch_lambdas(FUNCTIONS):
        yield


def run(
    workflow: ImportWorkflow, request: dict[str, Any], *, name: str | None = None, timeout_s: float = 60
) -> dict[str, Any]:
    """Start an execution (named after the import id, as operators do) and wait for it to end."""
    sfn = boto3.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=workflow.state_machine_arn,
        name=name or str(request.get("import_id", "import")),
        input=json.dumps(request),
    )["executionArn"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            return dict(described)
        time.sleep(0.2)
    raise TimeoutError(f"execution {execution} still RUNNING after {timeout_s}s")


def state_history(execution_arn: str) -> list[str]:
    """Names of the states entered, in order."""
    events = boto3.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]


def notifications(workflow: ImportWorkflow) -> list[dict[str, str]]:
    """SNS messages (Subject, Message) delivered so far to the operations topic."""
    sqs = boto3.client("sqs")
    received = sqs.receive_message(QueueUrl=workflow.notifications_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    out = []
    for message in received.get("Messages", []):
        body = json.loads(message["Body"])
        out.append({"Subject": body.get("Subject", ""), "Message": body["Message"]})
    return out
