"""Deploy and drive the canary rollout and rollback workflows on the emulator (integration tests and demo).

What ``template.yaml`` creates on AWS is created here on the moto server with the same substitution
names: the approval and registry tables (plus the core tables, topic and kill switch), the Lambda
functions (their invocations run the project's real handlers through :mod:`devtools.lambda_dispatch`)
and both state machines, created from their ASL files. A SageMaker endpoint with one primary
variant stands in for production. The rollout request and approval functions' URLs are driven by
calling their real handlers with the event Lambda gives an IAM-signed request (moto does not serve
function URLs; :mod:`devtools.function_url` serves them over HTTP for the CLI's tests).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import boto3

from devtools import emulator_extensions
from devtools.aws_resources import CoreResources, create_core_resources, create_inbox, create_table
from devtools.emulated_account import ACCOUNT_ID, REGION
from devtools.lambda_dispatch import FakeLambdaContext, dispatch_lambdas, load_handler_module
from devtools.state_machines import (
    create_functions,
    create_role,
    create_state_machine,
    read_notifications,
    start,
    state_history,
    wait,
)
from fleetops.config import VariantHosting, load_fleet_config
from fleetops.metrics import NAMESPACE, Dimension, MetricName
from fleetops.model_contract import ModelContract
from fleetops.tables import APPROVAL_PK, REGISTRY_PK, REGISTRY_SK

# start, wait and state_history come from devtools.state_machines and are part of this module's API.
__all__ = [
    "APPROVAL_URL",
    "ARTIFACT_BUCKET",
    "CAPTURE_BUCKET",
    "ENDPOINT",
    "FUNCTIONS",
    "IMAGE_REPOSITORY",
    "INSTANCE_TYPE",
    "POINTER_PREFIX",
    "PRIMARY",
    "REPO",
    "REQUESTER",
    "ROLE",
    "ROLLBACK_ASL",
    "ROLLOUT_ASL",
    "RolloutWorkflow",
    "approval_link",
    "canary_weight",
    "create_endpoint",
    "deploy",
    "handlers",
    "hosting",
    "notifications",
    "open_link",
    "pages",
    "put_variant_metrics",
    "request_rollout",
    "start",
    "start_rollout",
    "state_history",
    "submit",
    "traffic",
    "url_event",
    "wait",
]

REPO = Path(__file__).resolve().parents[1]
ROLLOUT_ASL = REPO / "statemachines" / "canary_rollout.asl.json"
ROLLBACK_ASL = REPO / "statemachines" / "rollback.asl.json"
#: fleet.yaml of the emulated stack: lists ENDPOINT, which the rollback refuses to touch otherwise.
FLEET = Path(__file__).resolve().parent / "workflow_fleet.yaml"
FUNCTIONS = {
    "rollout-validate": "rollout_validate",
    "endpoint-config": "endpoint_config",
    "artifact-gate": "artifact_gate",
    "candidate-gate": "candidate_gate",
    "shadow-compare": "shadow_compare",
    "canary-analysis": "canary_analysis",
    "approval-notify": "approval_notify",
    "approval-verify": "approval_verify",
    "rollout-capacity": "rollout_capacity",
    "rollback-plan": "rollback_plan",
}
ENDPOINT = "manga-chat"
PRIMARY = "primary"
#: moto's own list lacks ml.g5/ml.g6; the SageMaker extension checks botocore's real enum instead.
INSTANCE_TYPE = "ml.g5.2xlarge"
ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/manga-llm-sagemaker-execution"
#: The stack's closed deploy payload (template.yaml: ModelExecutionRoleArn, ModelImageRepositoryUri,
#: ModelArtifactBucket): the only role, image repository and weights bucket a rollout may use.
IMAGE_REPOSITORY = f"{ACCOUNT_ID}.dkr.ecr.{REGION}.amazonaws.com/manga-llm"
ARTIFACT_BUCKET = "manga-llm-artifacts"
#: The stack's CaptureBucket: shadowed rollouts' data capture, SSE-KMS with a key of its own (CaptureKey).
CAPTURE_BUCKET = "manga-llm-captures"
APPROVAL_URL = "https://approve.example.lambda-url.us-east-1.on.aws/"
REQUEST_URL = "https://request.example.lambda-url.us-east-1.on.aws/"
#: Who requests the rollouts of these tests (signed caller of the request function); approvers are others.
REQUESTER = "arn:aws:iam::123456789012:user/hana"
#: Who approves by default.
APPROVER = "arn:aws:iam::123456789012:user/ayumi"
POINTER_PREFIX = "/manga-llm-fleet/models"


@dataclass(frozen=True)
class RolloutWorkflow:
    rollout_arn: str
    rollback_arn: str
    approval_table: str
    registry_table: str
    audit_table: str
    lease_table: str
    topic_arn: str
    inbox_url: str
    environment: dict[str, str]
    #: The stack's PagingTopic, and a queue subscribed to it (a rollback that cannot verify itself pages).
    paging_topic_arn: str = ""
    paging_inbox_url: str = ""


def hosting(name: str = ENDPOINT) -> VariantHosting:
    """The AMI and timeouts the emulated stack's fleet.yaml gives the endpoint (the schema's for an unlisted one)."""
    listed = load_fleet_config(FLEET).endpoint(name)
    return listed.hosting if listed else VariantHosting()


def create_endpoint(name: str = ENDPOINT, instance_count: int = 2) -> str:
    """An InService endpoint with one primary variant serving the current model (v6); returns its config name.

    The model carries the model contract's environment, as ``fleetctl endpoint create`` writes it, so its answers
    name v6 (``backend.version``; the emulator's runtime reads it from there).
    """
    sagemaker = boto3.client("sagemaker")
    contract = ModelContract(endpoint_name=name, variant_name=PRIMARY, model_version="v6")
    sagemaker.create_model(
        ModelName=f"{name}-v6-model",
        ExecutionRoleArn=ROLE,
        PrimaryContainer={
            "Image": f"{ACCOUNT_ID}.dkr.ecr.{REGION}.amazonaws.com/manga-llm:v6",
            "Environment": contract.environment(),
        },
    )
    config = f"{name}-v6-config"
    variants: Any = [
        {
            "VariantName": PRIMARY,
            "ModelName": f"{name}-v6-model",
            "InstanceType": INSTANCE_TYPE,
            "InitialInstanceCount": instance_count,
            "InitialVariantWeight": 1.0,
            **hosting(name).variant_fields(),
        }
    ]
    sagemaker.create_endpoint_config(EndpointConfigName=config, ProductionVariants=variants)
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=config)
    return config


def deploy(core: CoreResources | None = None) -> RolloutWorkflow:
    """Create both workflows and what they use on the (freshly reset) emulator (``core``: shared with others)."""
    emulator_extensions.install()
    core = core or create_core_resources()
    approvals = create_table("manga-llm-fleet-approvals", APPROVAL_PK)
    registry = create_table("manga-llm-fleet-model-registry", REGISTRY_PK, REGISTRY_SK)
    arns = create_functions(FUNCTIONS, create_role("rollout-functions"))
    sfn_role = create_role("rollout-states")
    common = {
        "LeaseTableName": core.lease_table,
        "AuditTableName": core.audit_table,
        "OperationsTopicArn": core.topic_arn,
    }
    paging = boto3.client("sns").create_topic(Name="manga-llm-fleet-paging")["TopicArn"]
    rollback = create_state_machine(
        "rollback",
        ROLLBACK_ASL,
        common
        | {
            "RollbackPlanFunctionArn": arns["rollback-plan"],
            "RolloutCapacityFunctionArn": arns["rollout-capacity"],
            "EndpointConfigFunctionArn": arns["endpoint-config"],
            "PagingTopicArn": paging,
        },
        sfn_role,
    )
    rollout = create_state_machine(
        "canary-rollout",
        ROLLOUT_ASL,
        common
        | {
            "RolloutValidateFunctionArn": arns["rollout-validate"],
            "ArtifactGateFunctionArn": arns["artifact-gate"],
            "EndpointConfigFunctionArn": arns["endpoint-config"],
            "CandidateGateFunctionArn": arns["candidate-gate"],
            "ShadowCompareFunctionArn": arns["shadow-compare"],
            "CanaryAnalysisFunctionArn": arns["canary-analysis"],
            "ApprovalNotifyFunctionArn": arns["approval-notify"],
            "ApprovalVerifyFunctionArn": arns["approval-verify"],
            "RolloutCapacityFunctionArn": arns["rollout-capacity"],
            "RollbackStateMachineArn": rollback,
            "ModelRegistryTableName": registry,
            "KillSwitchParameterName": core.kill_switch_parameter,
        },
        sfn_role,
    )
    inbox = create_inbox(core.topic_arn, "rollout-inbox")
    paging_inbox = create_inbox(paging, "paging-inbox")
    capture_key = _create_capture_store()
    env = core.environment() | {
        "APPROVAL_TABLE": approvals,
        "APPROVAL_URL": APPROVAL_URL,
        "MODEL_POINTER_PREFIX": POINTER_PREFIX,
        "ROLLOUT_STATE_MACHINE_ARN": rollout,
        "FLEET_CONFIG_PATH": str(FLEET),
        "MODEL_EXECUTION_ROLE_ARN": ROLE,
        "MODEL_IMAGE_REPOSITORY": IMAGE_REPOSITORY,
        "MODEL_ARTIFACT_BUCKET": ARTIFACT_BUCKET,
        "SHADOW_CAPTURE_BUCKET": CAPTURE_BUCKET,
        "SHADOW_CAPTURE_KEY_ARN": capture_key,
    }
    return RolloutWorkflow(
        rollout,
        rollback,
        approvals,
        registry,
        core.audit_table,
        core.lease_table,
        core.topic_arn,
        inbox,
        env,
        paging_topic_arn=paging,
        paging_inbox_url=paging_inbox,
    )


def _create_capture_store() -> str:
    """The capture bucket, encrypted by default with its own KMS key (as template.yaml's); the key's ARN."""
    key = boto3.client("kms").create_key(Description="shadow capture")["KeyMetadata"]["Arn"]
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=CAPTURE_BUCKET)
    s3.put_bucket_encryption(
        Bucket=CAPTURE_BUCKET,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}}]
        },
    )
    return str(key)


@contextmanager
def handlers() -> Iterator[None]:
    """Route the workflows' Lambda invocations to the project's real handlers."""
    with dispatch_lambdas(FUNCTIONS):
        yield


def notifications(workflow: RolloutWorkflow, wait_s: float = 0) -> list[dict[str, str]]:
    """SNS messages (Subject, Message) delivered since the last call, waiting up to ``wait_s`` for one."""
    return read_notifications(workflow.inbox_url, wait_s)


def pages(workflow: RolloutWorkflow, wait_s: float = 0) -> list[dict[str, str]]:
    """What the paging topic delivered since the last call (Subject, Message), waiting up to ``wait_s`` for one."""
    return read_notifications(workflow.paging_inbox_url, wait_s)


def approval_link(workflow: RolloutWorkflow, decision: str, execution_arn: str, timeout_s: float = 60) -> str:
    """Wait for the approval request mail and return its link for ``decision`` (approve / reject)."""
    sfn = boto3.client("stepfunctions")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for note in notifications(workflow, wait_s=0.5):
            for line in note["Message"].splitlines():
                if line.lower().startswith(f"{decision}:"):
                    return line.split(":", 1)[1].strip()
        described = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            raise RuntimeError(f"no approval request: execution {described['status']}: {described.get('cause')}")
    raise TimeoutError(f"no approval request arrived in {timeout_s} s")


def url_event(
    method: str, link: str, caller: str | None, body: dict[str, str] | None = None, json_body: Any = None
) -> dict[str, Any]:
    """The event Lambda passes for a function URL request signed by ``caller`` (payload format 2.0).

    ``body`` is sent as a form, ``json_body`` as JSON.
    """
    query = {k: v[0] for k, v in parse_qs(urlparse(link).query).items()}
    # A role session's ids end in its session name (AROA...:alice), an IAM user's are its own (AIDA...).
    user_id = f"AROAEXAMPLE:{caller.rsplit('/', 1)[-1]}" if caller and ":assumed-role/" in caller else "AIDAEXAMPLE"
    iam = {"userArn": caller, "accountId": ACCOUNT_ID, "callerId": user_id, "userId": user_id}
    authorizer = {"iam": iam} if caller else {}
    content_type, text = "application/x-www-form-urlencoded", urlencode(body) if body is not None else None
    if json_body is not None:
        content_type, text = "application/json", json.dumps(json_body)
    return {
        "version": "2.0",
        "rawPath": "/",
        "rawQueryString": urlparse(link).query,
        "queryStringParameters": query or None,
        "headers": {"content-type": content_type, "host": urlparse(link).netloc},
        "requestContext": {
            "http": {"method": method, "path": "/", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "x"},
            "authorizer": authorizer,
            "timeEpoch": int(datetime.now(UTC).timestamp() * 1000),
            "requestId": "req",
            "stage": "$default",
            "domainName": urlparse(link).netloc,
        },
        "body": text,
        "isBase64Encoded": False,
    }


def _call(folder: str, event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = load_handler_module(folder).lambda_handler(
        event, FakeLambdaContext(function_name=folder.replace("_", "-"))
    )
    return result


def request_rollout(request: dict[str, Any], caller: str | None = REQUESTER) -> dict[str, Any]:
    """POST ``request`` to the rollout request function's real handler as ``caller``; its answer.

    ``requested_by`` is dropped from ``request`` (the sample event carries one): the function sets it from
    the signature and refuses a body that sets it.
    """
    body = {k: v for k, v in request.items() if k != "requested_by"}
    return _call("rollout_request", url_event("POST", REQUEST_URL, caller, json_body=body))


def start_rollout(request: dict[str, Any], caller: str = REQUESTER) -> str:
    """:func:`request_rollout`, checked accepted; the execution ARN."""
    answer = request_rollout(request, caller)
    if answer["statusCode"] != 202:
        raise RuntimeError(f"rollout request refused: {answer['statusCode']} {answer['body']}")
    return str(json.loads(answer["body"])["execution_arn"])


def open_link(link: str, caller: str | None = APPROVER) -> dict[str, Any]:
    """GET the link through the approval endpoint's real handler (what a browser or mail scanner does)."""
    return _call("approval_endpoint", url_event("GET", link, caller))


def submit(link: str, caller: str | None = APPROVER) -> dict[str, Any]:
    """POST the confirmation form for ``link`` through the approval endpoint's real handler."""
    query = {k: v[0] for k, v in parse_qs(urlparse(link).query).items()}
    form = {"id": query.get("id", ""), "decision": query.get("decision", "")}
    return _call("approval_endpoint", url_event("POST", APPROVAL_URL, caller, form))


def put_variant_metrics(
    variant: str,
    *,
    requests: int,
    errors: int = 0,
    latency_ms: float = 800.0,
    ttft_ms: float = 250.0,
    oom: int = 0,
    endpoint: str = ENDPOINT,
) -> None:
    """Publish what the gateway's EMF would produce for a variant over the last minute."""
    now = datetime.now(UTC)
    dims = [{"Name": Dimension.ENDPOINT.value, "Value": endpoint}, {"Name": Dimension.VARIANT.value, "Value": variant}]
    data: list[Any] = [
        {"MetricName": MetricName.REQUESTS.value, "Dimensions": dims, "Value": float(requests), "Timestamp": now},
        {"MetricName": MetricName.REQUEST_ERRORS.value, "Dimensions": dims, "Value": float(errors), "Timestamp": now},
        {"MetricName": MetricName.OOM_CAUGHT.value, "Dimensions": dims, "Value": float(oom), "Timestamp": now},
    ]
    for i in range(20):  # a spread of latencies so that p95 means something
        data.append(
            {
                "MetricName": MetricName.REQUEST_LATENCY.value,
                "Dimensions": dims,
                "Value": latency_ms * (0.5 + i / 20),
                "Timestamp": now,
            }
        )
        data.append(
            {
                "MetricName": MetricName.TIME_TO_FIRST_TOKEN.value,
                "Dimensions": dims,
                "Value": ttft_ms * (0.5 + i / 20),
                "Timestamp": now,
            }
        )
    cloudwatch = boto3.client("cloudwatch")
    for first in range(0, len(data), 20):
        cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=data[first : first + 20])


@contextmanager
def traffic(
    canary: dict[str, Any] | Callable[[float], dict[str, Any]],
    primary: dict[str, Any],
    every_s: float = 0.5,
    max_s: float = 120,
    endpoint: str = ENDPOINT,
) -> Iterator[None]:
    """Keep publishing per-variant metrics (bounded in time) while a rollout bakes, like live traffic.

    ``canary`` and ``primary`` are keyword arguments of :func:`put_variant_metrics` per interval;
    ``canary`` may be a function of the canary's current weight (a bug that shows only under load).
    """
    import threading

    stop = threading.Event()

    def feed() -> None:
        deadline = time.monotonic() + max_s
        while not stop.is_set() and time.monotonic() < deadline:
            load = canary(canary_weight(endpoint=endpoint)) if callable(canary) else canary
            # An ``endpoint`` in the per-interval arguments (as callers passed before this one) wins.
            put_variant_metrics("canary", **({"endpoint": endpoint} | load))
            put_variant_metrics(PRIMARY, **({"endpoint": endpoint} | primary))
            stop.wait(every_s)

    thread = threading.Thread(target=feed, name="traffic", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def canary_weight(variant: str = "canary", endpoint: str = ENDPOINT) -> float:
    """The canary's current weight in percent of the endpoint's total (0 when absent)."""
    described = boto3.client("sagemaker").describe_endpoint(EndpointName=endpoint)["ProductionVariants"]
    total = sum(v.get("CurrentWeight", 0.0) for v in described) or 1.0
    return 100.0 * sum(v.get("CurrentWeight", 0.0) for v in described if v["VariantName"] == variant) / total
