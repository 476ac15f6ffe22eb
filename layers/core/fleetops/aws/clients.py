"""The one place boto3 clients are built: botocore's standard retry mode for every default client.

Standard mode retries throttling, 5xx answers and dropped connections itself, with capped exponential
backoff and a per-client retry quota, so adapters do not stack a second throttling retry on top.
What botocore cannot know is that some 400s also pass by waiting (a change still in progress);
:mod:`fleetops.aws.retry` waits out only those. boto3 reads ``AWS_ENDPOINT_URL`` (and
``AWS_ENDPOINT_URL_<SERVICE>``) on its own, which is how local runs reach the emulator.

Examples
--------
>>> CONFIG.retries
{'mode': 'standard', 'total_max_attempts': 5}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient, DynamoDBServiceResource
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker_runtime import SageMakerRuntimeClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_ssm import SSMClient
    from mypy_boto3_stepfunctions import SFNClient

#: Sends per call, the first included (legacy mode's count); the worst throttling pauses (1 + 2 + 4 + 8 s)
#: fit well inside a Lambda timeout. ``total_max_attempts``, since botocore's ``max_attempts`` counts retries only.
MAX_ATTEMPTS = 5
CONFIG = Config(retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS})


@overload
def client(service_name: Literal["application-autoscaling"]) -> ApplicationAutoScalingClient: ...
@overload
def client(service_name: Literal["bedrock-runtime"]) -> BedrockRuntimeClient: ...
@overload
def client(service_name: Literal["cloudwatch"]) -> CloudWatchClient: ...
@overload
def client(service_name: Literal["dynamodb"]) -> DynamoDBClient: ...
@overload
def client(service_name: Literal["s3"]) -> S3Client: ...
@overload
def client(service_name: Literal["sagemaker"]) -> SageMakerClient: ...
@overload
def client(service_name: Literal["sagemaker-runtime"]) -> SageMakerRuntimeClient: ...
@overload
def client(service_name: Literal["sns"]) -> SNSClient: ...
@overload
def client(service_name: Literal["ssm"]) -> SSMClient: ...
@overload
def client(service_name: Literal["stepfunctions"]) -> SFNClient: ...
def client(service_name: str) -> Any:
    """A client of the default session (region and credentials from the environment) with :data:`CONFIG`."""
    import boto3  # here, not at import: a handler's cold import stays small; the first client pays for boto3

    return boto3.client(service_name, config=CONFIG)  # type: ignore[call-overload]


def dynamodb_resource() -> DynamoDBServiceResource:
    """The DynamoDB resource API (the tables that read and write plain Python values) with :data:`CONFIG`."""
    import boto3

    return boto3.resource("dynamodb", config=CONFIG)
