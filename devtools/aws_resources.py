"""Create, on the emulator, the resources that ``template.yaml`` creates on AWS (tests and demo only).

Key schemas come from :mod:`fleetops.tables`, the same source the template follows. The table and
inbox helpers here are the only ones: the workflow and remediation stacks build on them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

import boto3

from fleetops.aws.autoscaling import DIMENSION, NAMESPACE, resource_id
from fleetops.aws.switches import RELEASED
from fleetops.config import VariantHosting
from fleetops.tables import AUDIT_PK, AUDIT_SK, CALENDAR_PK, LEASE_PK

# moto 5.2.5's SageMaker instance-type list predates ml.g5/ml.g6; production uses ml.g5.2xlarge.
EMULATED_INSTANCE_TYPE = "ml.g4dn.xlarge"


@dataclass(frozen=True)
class CoreResources:
    audit_table: str
    calendar_table: str
    lease_table: str
    kill_switch_parameter: str
    topic_arn: str

    def environment(self) -> dict[str, str]:
        """The environment variables ``template.yaml`` gives every function."""
        return {
            "AUDIT_TABLE": self.audit_table,
            "CALENDAR_TABLE": self.calendar_table,
            "LEASE_TABLE": self.lease_table,
            "KILL_SWITCH_PARAMETER": self.kill_switch_parameter,
            "NOTIFICATION_TOPIC_ARN": self.topic_arn,
        }


def create_table(name: str, pk: str, sk: str | None = None) -> str:
    """An on-demand table keyed by string ``pk`` (and ``sk``), as every table in ``template.yaml`` is.

    Callers pass the key names from :mod:`fleetops.tables`, so the emulated schema cannot drift from
    the one the code under test reads and writes. Returns ``name``.
    """
    keys: list[tuple[str, Literal["HASH", "RANGE"]]] = [(pk, "HASH")]
    if sk:
        keys.append((sk, "RANGE"))
    boto3.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": k, "KeyType": t} for k, t in keys],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k, _ in keys],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def create_inbox(topic_arn: str, queue_name: str) -> str:
    """An SQS queue subscribed to ``topic_arn``; returns its URL.

    Tests and demos read what a topic published from here, as an operator's mail would arrive
    (the emulator delivers SNS to SQS, not to e-mail).
    """
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    boto3.client("sns").subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)
    return str(url)


def read_inbox(queue_url: str, wait_s: float = 0) -> list[dict[str, Any]]:
    """The SNS envelopes delivered to an inbox since the last read, oldest batch first.

    Every message read is deleted, so each call returns only what is new. Waits (bounded, polling)
    up to ``wait_s`` for the first message, because SNS delivers asynchronously.
    """
    sqs = boto3.client("sqs")
    envelopes: list[dict[str, Any]] = []
    deadline = time.monotonic() + wait_s
    while True:
        batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        for message in batch:
            envelopes.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        if batch:
            continue
        if envelopes or time.monotonic() >= deadline:
            return envelopes
        time.sleep(0.2)


def create_core_resources(stack: str = "manga-llm-fleet") -> CoreResources:
    parameter = f"/{stack}/automation/kill-switch"
    boto3.client("ssm").put_parameter(Name=parameter, Value=RELEASED, Type="String", Overwrite=True)
    return CoreResources(
        audit_table=create_table(f"{stack}-audit", AUDIT_PK, AUDIT_SK),
        calendar_table=create_table(f"{stack}-calendar", CALENDAR_PK),
        lease_table=create_table(f"{stack}-lease", LEASE_PK),
        kill_switch_parameter=parameter,
        topic_arn=boto3.client("sns").create_topic(Name=f"{stack}-operations")["TopicArn"],
    )


def create_endpoint(
    endpoint_name: str, variants: dict[str, tuple[int, int, int]], instance_type: str = EMULATED_INSTANCE_TYPE
) -> None:
    """A SageMaker endpoint whose variants are registered scalable targets.

    ``variants`` maps variant name to (initial instances, MinCapacity, MaxCapacity).
    """
    sagemaker = boto3.client("sagemaker")
    autoscaling = boto3.client("application-autoscaling")
    role = "arn:aws:iam::123456789012:role/sagemaker-execution"
    production_variants = []
    for name, (count, _, _) in variants.items():
        model = f"{endpoint_name}-{name}-model"
        sagemaker.create_model(
            ModelName=model,
            ExecutionRoleArn=role,
            PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm:1"},
        )
        production_variants.append(
            {
                "VariantName": name,
                "ModelName": model,
                "InitialInstanceCount": count,
                "InstanceType": instance_type,
                "InitialVariantWeight": 1.0,
                **VariantHosting().variant_fields(),  # as every config the project creates: AMI and timeouts
            }
        )
    sagemaker.create_endpoint_config(
        EndpointConfigName=f"{endpoint_name}-config-1",
        ProductionVariants=production_variants,  # type: ignore[arg-type]
    )
    sagemaker.create_endpoint(EndpointName=endpoint_name, EndpointConfigName=f"{endpoint_name}-config-1")
    for name, (_, low, high) in variants.items():
        autoscaling.register_scalable_target(
            ServiceNamespace=NAMESPACE,
            ResourceId=resource_id(endpoint_name, name),
            ScalableDimension=DIMENSION,
            MinCapacity=low,
            MaxCapacity=high,
        )
