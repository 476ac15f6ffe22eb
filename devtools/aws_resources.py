"""Create, on the emulator, the resources that ``template.yaml`` creates on AWS (tests and demo only).

Key schemas come from :mod:`fleetops.tables`, the same source the template follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import boto3

from fleetops.aws.autoscaling import DIMENSION, NAMESPACE, resource_id
from fleetops.aws.switches import RELEASED
from fleetops.tables import AUDIT_PK, AUDIT_SK, CALENDAR_PK, LEASE_PK

# moto 5.2.5's SageMaker instance-type list predates ml.g5/ml.g6 (ENVIRONMENT.md); production uses ml.g5.2xlarge.
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


def _table(name: str, pk: str, sk: str | None = None) -> str:
    keys = [{"AttributeName": pk, "KeyType": "HASH"}]
    attrs = [{"AttributeName": pk, "AttributeType": "S"}]
    if sk:
        keys.append({"AttributeName": sk, "KeyType": "RANGE"})
        attrs.append({"AttributeName": sk, "AttributeType": "S"})
    boto3.client("dynamodb").create_table(
        TableName=name,
        KeySchema=keys,  # type: ignore[arg-type]
        AttributeDefinitions=attrs,  # type: ignore[arg-type]
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def create_core_resources(stack: str = "manga-llm-fleet") -> CoreResources:
    parameter = f"/{stack}/automation/kill-switch"
    boto3.client("ssm").put_parameter(Name=parameter, Value=RELEASED, Type="String", Overwrite=True)
    return CoreResources(
        audit_table=_table(f"{stack}-audit", AUDIT_PK, AUDIT_SK),
        calendar_table=_table(f"{stack}-calendar", CALENDAR_PK),
        lease_table=_table(f"{stack}-lease", LEASE_PK),
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
