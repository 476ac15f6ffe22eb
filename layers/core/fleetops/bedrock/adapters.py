"""Thin AWS adapters for the import workflow: S3 artifact listing and Bedrock Converse."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from fleetops.aws import clients
from fleetops.aws.retry import RetryPolicy, error_code
from fleetops.bedrock.models import ArtifactObject, Reply

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_s3 import S3Client


class S3ArtifactStore:
    """Lists and reads the artifact prefix."""

    def __init__(self, client: S3Client | None = None):
        self._s3 = client or clients.client("s3")

    def list_objects(self, bucket: str, prefix: str) -> list[ArtifactObject]:
        """Every object under ``prefix`` (names relative to it)."""
        objects: list[ArtifactObject] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            objects.extend(
                ArtifactObject(name=o["Key"].removeprefix(prefix), size=o["Size"])
                for o in page.get("Contents", [])
                if o["Key"] != prefix
            )
        return objects

    def read_text(self, bucket: str, key: str) -> str:
        body = self._s3.get_object(Bucket=bucket, Key=key)["Body"]
        return body.read().decode("utf-8")


def _converse_retryable(exc: BaseException) -> bool:
    # An imported model scaled to zero answers ModelNotReadyException while it loads, which takes longer
    # than botocore's few quick retries of it: wait it out here. Throttling and 5xx are botocore's.
    return error_code(exc) == "ModelNotReadyException"


class BedrockConverse:
    """Asks an imported model one question through the Converse API."""

    def __init__(self, client: BedrockRuntimeClient | None = None, retry: RetryPolicy | None = None):
        self._runtime = client or clients.client("bedrock-runtime")
        policy = retry or RetryPolicy()
        self._retrying = Retrying(
            retry=retry_if_exception(_converse_retryable),
            wait=wait_random_exponential(multiplier=policy.initial_wait_s, max=policy.max_wait_s),
            stop=stop_after_attempt(policy.attempts),
            reraise=True,
        )

    def ask(self, model_arn: str, prompt: str, max_tokens: int) -> Reply:
        """Send one user message and return the text answer with its stop reason and usage."""
        started = time.monotonic()
        response = self._retrying(
            self._runtime.converse,
            modelId=model_arn,
            messages=[{"role": "user", "content": [{"text": prompt}]}],
            inferenceConfig={"maxTokens": max_tokens, "temperature": 0.0},
        )
        content = response["output"].get("message", {}).get("content", [])
        usage = response.get("usage", {})
        return Reply(
            text="".join(block.get("text", "") for block in content),
            stop_reason=response["stopReason"],
            input_tokens=usage.get("inputTokens", 0),
            output_tokens=usage.get("outputTokens", 0),
            latency_ms=response.get("metrics", {}).get("latencyMs", int((time.monotonic() - started) * 1000)),
        )
