"""Deploy and run the Bedrock import workflow on the emulator (integration tests and the demo).

What ``template.yaml`` creates on AWS is created here on the moto server: the artifact bucket, the
registry table (keys from :mod:`fleetops.tables`), the two Lambda functions (their invocations run the
project's real handlers through :mod:`devtools.lambda_dispatch`) and the state machine, created from
``statemachines/bedrock_import.asl.json`` with the same substitution names as the template.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from devtools import emulator_extensions
from devtools.aws_resources import create_core_resources, create_inbox, create_table
from devtools.lambda_dispatch import dispatch_lambdas
from devtools.state_machines import (
    create_functions,
    create_role,
    create_state_machine,
    read_notifications,
    start,
    state_history,
    wait,
)
from fleetops.tables import REGISTRY_PK, REGISTRY_SK

# state_history comes from devtools.state_machines and is part of this module's API.
__all__ = [
    "ARTIFACT_BUCKET",
    "ARTIFACT_ROOT",
    "ASL",
    "FUNCTIONS",
    "LLAMA_FILES",
    "REPO",
    "ImportWorkflow",
    "deploy",
    "handlers",
    "notifications",
    "run",
    "state_history",
    "upload_artifacts",
]

REPO = Path(__file__).resolve().parents[1]
ASL = REPO / "statemachines" / "bedrock_import.asl.json"
ARTIFACT_BUCKET = "manga-llm-fleet-artifacts"  # the bucket events/bedrock_validate_artifacts.json names
ARTIFACT_ROOT = f"s3://{ARTIFACT_BUCKET}/bedrock-imports/"
FUNCTIONS = {"bedrock-validate-artifacts": "bedrock_validate_artifacts", "bedrock-smoke-test": "bedrock_smoke_test"}

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


def upload_artifacts(prefix: str, files: dict[str, bytes]) -> str:
    """Put a model folder under the artifact root; returns its ``s3://`` URI."""
    s3 = boto3.client("s3")
    for name, body in files.items():
        s3.put_object(Bucket=ARTIFACT_BUCKET, Key=f"bedrock-imports/{prefix}{name}", Body=body)
    return f"{ARTIFACT_ROOT}{prefix}"


def deploy() -> ImportWorkflow:
    """Create the workflow's resources on the (freshly reset) emulator."""
    emulator_extensions.install()
    core = create_core_resources()
    boto3.client("s3").create_bucket(Bucket=ARTIFACT_BUCKET)
    registry = create_table("manga-llm-fleet-model-registry", REGISTRY_PK, REGISTRY_SK)
    arns = create_functions(FUNCTIONS, create_role("bedrock-import-functions"))
    machine = create_state_machine(
        "bedrock-import",
        ASL,
        {
            "ValidateArtifactsFunctionArn": arns["bedrock-validate-artifacts"],
            "SmokeTestFunctionArn": arns["bedrock-smoke-test"],
            "ImportRoleArn": create_role("bedrock-import"),
            "ModelRegistryTableName": registry,
            "OperationsTopicArn": core.topic_arn,
        },
        create_role("bedrock-import-states"),
    )
    queue_url = create_inbox(core.topic_arn, "operations-inbox")
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
    execution = start(workflow.state_machine_arn, request, name or str(request.get("import_id", "import")))
    return wait(execution, timeout_s)


def notifications(workflow: ImportWorkflow) -> list[dict[str, str]]:
    """SNS messages (Subject, Message) delivered to the operations topic since the last call."""
    return read_notifications(workflow.notifications_queue_url)
