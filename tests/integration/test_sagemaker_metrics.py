"""SageMaker's per-variant metrics come from the invocations the emulated runtime answers, not from tests.

Emulated by this project: ``devtools/emulator_extensions/sagemaker_metrics.py`` behind ``sagemaker_runtime``. The
pre-scale reader (``fleetops.prescale.demand_history``) reads them back over HTTP as it reads CloudWatch. The
variants' container is a test double (a local HTTP server answering with the status each request asks for): what
is checked is which datapoints each kind of answer leaves, not a model's answer. The real container's path is
checked in ``local_system/test_local_sagemaker.py``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.cloudwatch.models import cloudwatch_backends

from devtools import emulator_extensions
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.emulator_extensions import sagemaker_runtime
from devtools.emulator_extensions.sagemaker_metrics import (
    INVOCATION_4XX_ERRORS,
    INVOCATION_5XX_ERRORS,
    MODEL_LATENCY,
)
from fleetops.metrics import SAGEMAKER_INVOCATIONS, SAGEMAKER_INVOCATIONS_PER_INSTANCE, SAGEMAKER_NAMESPACE
from fleetops.model_contract import MODEL_VERSION
from fleetops.prescale.demand_history import DemandHistory
from fleetops.prescale.forecast import SLOT_S
from tests.integration.hosting_double import OneUrlHosting, serving

ENDPOINT = "manga-chat"
ACCOUNT = "123456789012"  # moto's default account
ROLE = "arn:aws:iam::123456789012:role/sagemaker-execution"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm:1"


class _AnswersAsAsked(BaseHTTPRequestHandler):
    """Test double for the model container: answers the status the body's ``status`` names, after ``sleep_s``."""

    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(asked.get("sleep_s", 0))
        body = json.dumps({"choices": [{"message": {"content": "Try Frieren."}}]}).encode()
        self.send_response(asked.get("status", 200))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def create_endpoint(instances: dict[str, int]) -> None:
    """``ENDPOINT`` with a variant per entry, at that many instances, each model naming its MODEL_VERSION."""
    sagemaker = boto3.client("sagemaker")
    variants = []
    for variant, count in instances.items():
        model = f"{ENDPOINT}-{variant}"
        sagemaker.create_model(
            ModelName=model,
            ExecutionRoleArn=ROLE,
            PrimaryContainer={"Image": IMAGE, "Environment": {MODEL_VERSION: f"{variant}-v1"}},
        )
        variants.append(
            {
                "VariantName": variant,
                "ModelName": model,
                "InitialInstanceCount": count,
                "InstanceType": "ml.g4dn.xlarge",
                "InitialVariantWeight": 1.0,
            }
        )
    sagemaker.create_endpoint_config(EndpointConfigName=f"{ENDPOINT}-1", ProductionVariants=variants)  # type: ignore[arg-type]
    sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=f"{ENDPOINT}-1")


def invoke(variant: str, **asked: Any) -> None:
    boto3.client("sagemaker-runtime").invoke_endpoint(
        EndpointName=ENDPOINT, TargetVariant=variant, Body=json.dumps(asked), ContentType="application/json"
    )


def statistic(
    variant: str, metric: str, stat: Literal["Sum", "SampleCount", "Maximum"], since: datetime
) -> float | None:
    """``stat`` of ``metric`` for ``variant`` over the minutes since ``since`` (``None``: no datapoint)."""
    answer = boto3.client("cloudwatch").get_metric_statistics(
        Namespace=SAGEMAKER_NAMESPACE,
        MetricName=metric,
        Dimensions=[{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "VariantName", "Value": variant}],
        StartTime=since - timedelta(minutes=1),
        EndTime=datetime.now(UTC) + timedelta(minutes=1),
        Period=600,
        Statistics=[stat],
    )
    points = answer["Datapoints"]
    return sum(p[stat] for p in points) if points else None


@pytest.fixture(autouse=True, scope="module")
def _extensions() -> None:
    emulator_extensions.install()


@pytest.fixture
def container_double(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with serving(_AnswersAsAsked) as url:
        monkeypatch.setattr(emulated_sagemaker, "hosting", OneUrlHosting(ENDPOINT, url))
        yield


def test_each_request_is_counted_per_variant_and_per_instance(container_double: None) -> None:
    since = datetime.now(UTC)
    create_endpoint({"primary": 2, "canary": 1})
    for _ in range(4):
        invoke("primary")
    invoke("canary")

    assert statistic("primary", SAGEMAKER_INVOCATIONS, "Sum", since) == 4
    assert statistic("primary", SAGEMAKER_INVOCATIONS_PER_INSTANCE, "Sum", since) == 2  # 1/2 per request
    assert statistic("canary", SAGEMAKER_INVOCATIONS, "Sum", since) == 1
    assert statistic("canary", SAGEMAKER_INVOCATIONS_PER_INSTANCE, "Sum", since) == 1
    assert statistic("primary", INVOCATION_5XX_ERRORS, "Sum", since) == 0
    assert statistic("primary", MODEL_LATENCY, "SampleCount", since) == 4


def test_a_model_error_counts_as_its_class_and_a_cut_for_time_as_a_5xx_without_latency(
    container_double: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    since = datetime.now(UTC)
    create_endpoint({"primary": 1})
    invoke("primary", sleep_s=0.2)
    for status in (404, 503):
        with pytest.raises(ClientError, match="ModelError"):  # what the caller sees: SageMaker's ModelError
            invoke("primary", status=status)
    monkeypatch.setattr(sagemaker_runtime.behaviour, "invocation_timeout_s", 0.3)
    with pytest.raises(ClientError, match="timed out"):
        invoke("primary", sleep_s=1.0)

    assert statistic("primary", SAGEMAKER_INVOCATIONS, "Sum", since) == 4
    assert statistic("primary", INVOCATION_4XX_ERRORS, "Sum", since) == 1
    assert statistic("primary", INVOCATION_5XX_ERRORS, "Sum", since) == 2  # the 503 and the cut
    assert statistic("primary", MODEL_LATENCY, "SampleCount", since) == 3  # every answer, not the cut
    slowest = statistic("primary", MODEL_LATENCY, "Maximum", since)
    assert slowest is not None and 200_000 <= slowest < 1_000_000  # microseconds: the 0.2 s answer


def test_the_pre_scale_history_reads_what_the_endpoint_served() -> None:
    """No hosting: the emulator's stand-in for the container answers, and still counts as SageMaker would."""
    create_endpoint({"primary": 1})
    now = datetime.now(UTC)
    for _ in range(3):
        invoke("primary")

    demand = DemandHistory().invocations(ENDPOINT, "primary", now - timedelta(minutes=10), now + timedelta(minutes=10))
    assert sum(rps or 0.0 for rps in demand.rps) * SLOT_S == pytest.approx(3)
    assert statistic("primary", MODEL_LATENCY, "SampleCount", now) is None  # no model ran


def test_the_requests_of_one_second_are_one_stored_datapoint_per_metric() -> None:
    """As SageMaker publishes statistics per period, not a datapoint per request: a datapoint per request made every
    CloudWatch read of the local system slower as traffic went on."""
    create_endpoint({"primary": 2})
    since = datetime.now(UTC)
    started = time.monotonic()
    for _ in range(30):
        invoke("primary")
    seconds = int(time.monotonic() - started) + 2  # the seconds the requests can have spanned

    assert statistic("primary", SAGEMAKER_INVOCATIONS, "Sum", since) == 30
    assert statistic("primary", SAGEMAKER_INVOCATIONS, "SampleCount", since) == 30  # each request still counted
    assert statistic("primary", SAGEMAKER_INVOCATIONS_PER_INSTANCE, "Sum", since) == pytest.approx(15)
    stored = [
        datum
        for datum in cloudwatch_backends[ACCOUNT][os.environ["AWS_DEFAULT_REGION"]].metric_data
        if datum.namespace == SAGEMAKER_NAMESPACE and datum.name == SAGEMAKER_INVOCATIONS
    ]
    assert 1 <= len(stored) <= seconds
