"""The caller-side Bedrock fallback (``clients.fallback_client``) answers users when prod's endpoint cannot.

Prod's endpoint is created as ``fleetctl endpoint create`` creates it from the shipped fleet.yaml: its model
network-isolated (prod's ``rollout_policy``), its environment without ``BEDROCK_FALLBACK_MODEL_ID``. Its container
is the real gateway (``python -m gateway serve``) started with that model's environment, reached through the
emulator's SageMaker Runtime (``devtools/emulator_extensions/sagemaker_runtime.py``: ``ModelError`` and
``ServiceUnavailable`` as botocore models them). Behind the gateway is ``StandinEngine``, a test double for vLLM
(``devtools.standin_engine``: no model can run here), stopped to take the engine down. The fallback model is
imported through the emulated Custom Model Import API and answers the emulated Converse
(``devtools/emulator_extensions/bedrock.py``: ``[emulated Converse: <model>] You asked: <the user's words>``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from clients.fallback_client import ENDPOINT_FAILED, EndpointRequestError, FallbackChat, FallbackFailedError
from devtools import emulator_extensions
from devtools.emulator import free_port
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.local_serving import PYTHONPATH, GatewayHandle, start_gateway, wait_http
from devtools.tiny_model import ensure_tiny_model
from fleetctl.endpoint_create import instance_types
from fleetctl.endpoint_spec import EndpointSpec, build_spec
from fleetops.config import InitialModel, load_fleet_config
from gateway.config import DEFAULT_CONFIG, load_gateway_config
from tests.conftest import REPO
from tests.integration.hosting_double import OneUrlHosting

SHIPPED = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
PROD = next(e for e in SHIPPED.endpoints if e.environment == "prod")
BUCKET = "fallback-model-artifacts"
QUESTION = "when does volume twelve of the pirate saga ship"
NOT_IMPORTED = "arn:aws:bedrock:us-east-1:123456789012:imported-model/not-imported"
FALLBACK_MESSAGE = load_gateway_config(DEFAULT_CONFIG).containment.fallback_message


class StandinEngine:
    """Test double for vLLM: the stand-in engine on one port, stopped and started again as a test needs."""

    def __init__(self, logs: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logs = logs
        self.process: subprocess.Popen[bytes] | None = None

    def up(self) -> None:
        if self.process is None:
            command = [sys.executable, "-m", "devtools.standin_engine", "--port", str(self.port), "--tokens", "8"]
            with (self.logs / "standin.log").open("ab") as log:
                env = {**os.environ, "PYTHONPATH": PYTHONPATH}
                self.process = subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True)
            wait_http(f"{self.url}/health", 60)

    def down(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None


def prod_spec() -> EndpointSpec:
    model = InitialModel(
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm:v7",
        version="v7",
        execution_role_arn="arn:aws:iam::123456789012:role/manga-llm-sagemaker-execution",
    )
    isolated = SHIPPED.rollout_floors("prod").network_isolation
    return build_spec(PROD, model, network_isolation=isolated, instance_types=instance_types())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandinEngine, GatewayHandle]]:
    """The real gateway with prod's model environment, in front of the stand-in engine."""
    work = tmp_path_factory.mktemp("caller-fallback")
    engine = StandinEngine(work)
    engine.up()
    environment = prod_spec().models[0]["PrimaryContainer"]["Environment"]
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    try:
        with start_gateway(tiny, work, engine_url=engine.url, env=environment, wait_ready_s=120) as gateway:
            yield engine, gateway
    finally:
        engine.down()


def deploy_prod_endpoint(monkeypatch: pytest.MonkeyPatch, container_url: str) -> EndpointSpec:
    """Prod's model, config and endpoint on the emulator, its variants served at ``container_url``."""
    emulator_extensions.install()
    monkeypatch.setattr(emulated_sagemaker, "hosting", OneUrlHosting(PROD.name, container_url))
    spec = prod_spec()
    sagemaker = boto3.client("sagemaker")
    for model in spec.models:
        sagemaker.create_model(**model)
    sagemaker.create_endpoint_config(**spec.endpoint_config)
    sagemaker.create_endpoint(EndpointName=spec.endpoint_name, EndpointConfigName=spec.endpoint_config_name)
    return spec


@pytest.fixture
def fallback_model() -> str:
    """The fallback model, imported through the emulated Custom Model Import API as the import workflow does."""
    emulator_extensions.install()
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="fallback/config.json", Body=b'{"architectures": ["LlamaForCausalLM"]}')
    bedrock = boto3.client("bedrock")
    job = bedrock.create_model_import_job(
        jobName="manga-fallback-import",
        importedModelName="manga-fallback",
        roleArn="arn:aws:iam::123456789012:role/bedrock-import",
        modelDataSource={"s3DataSource": {"s3Uri": f"s3://{BUCKET}/fallback/"}},
    )
    deadline = time.monotonic() + 10
    while (described := bedrock.get_model_import_job(jobIdentifier=job["jobArn"]))["status"] == "InProgress":
        assert time.monotonic() < deadline, described
    return str(described["importedModelArn"])


def wait_serving(gateway: GatewayHandle, timeout_s: float = 30) -> None:
    """Until the gateway's engine answers again: after a restart the gateway sees it on its next health check."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = httpx.post(f"{gateway.url}/invocations", json=ask(), timeout=10).json()
        if answer["choices"][0]["finish_reason"] != "fallback":
            return
        time.sleep(0.2)
    raise TimeoutError(f"the gateway's engine did not answer within {timeout_s} s")


def ask(question: str = QUESTION, **fields: object) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}], "max_tokens": 64, **fields}


def chat(model_id: str, endpoint: str = PROD.name) -> FallbackChat:
    return FallbackChat(endpoint, model_id, system_prompt="Answer as the manga store's assistant.", backoff_s=0.01)


def test_prod_users_get_the_models_answer_and_bedrocks_once_the_engine_is_down(
    served: tuple[StandinEngine, GatewayHandle], fallback_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, gateway = served
    spec = deploy_prod_endpoint(monkeypatch, gateway.url)
    runtime = boto3.client("sagemaker-runtime")

    engine.up()
    wait_serving(gateway)
    healthy = chat(fallback_model).ask(ask())
    engine.down()
    direct = json.loads(runtime.invoke_endpoint(EndpointName=PROD.name, Body=json.dumps(ask()))["Body"].read())
    answer = chat(fallback_model).ask(ask())

    # Prod's model is network-isolated and its container has no Bedrock fallback of its own ...
    [model] = spec.models
    assert model["EnableNetworkIsolation"] is True
    assert "BEDROCK_FALLBACK_MODEL_ID" not in model["PrimaryContainer"]["Environment"]
    # ... so with the engine down the gateway alone answers its fallback message (the documented marker) ...
    assert direct["choices"][0]["finish_reason"] == "fallback"
    assert direct["choices"][0]["message"]["content"] == FALLBACK_MESSAGE
    assert direct["backend"]["fallback_reason"] == "engine_unavailable"
    # ... and the caller's fallback answers the user from Bedrock instead.
    assert (answer.source, answer.fallback_reason, answer.endpoint_attempts, answer.bedrock_attempts) == (
        "bedrock",
        "engine_unavailable",
        1,
        1,
    )
    assert answer.text == f"[emulated Converse: manga-fallback] You asked: {QUESTION}"
    # While the engine was up, the model answered and Bedrock was not asked.
    assert (healthy.source, healthy.fallback_reason, healthy.bedrock_attempts) == ("endpoint", None, 0)
    assert healthy.text and healthy.text != FALLBACK_MESSAGE and "emulated Converse" not in healthy.text


def test_with_no_container_answering_the_endpoint_is_retried_then_bedrock_answers(
    fallback_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy_prod_endpoint(monkeypatch, f"http://127.0.0.1:{free_port()}")  # every instance gone: nothing listens

    answer = chat(fallback_model).ask(ask(history=[{"role": "assistant", "content": "Hello, how can I help?"}]))

    assert (answer.source, answer.fallback_reason, answer.endpoint_error) == (
        "bedrock",
        ENDPOINT_FAILED,
        "ServiceUnavailable",
    )
    assert (answer.endpoint_attempts, answer.bedrock_attempts) == (2, 1)  # the default tries, then one Converse
    assert answer.text == f"[emulated Converse: manga-fallback] You asked: {QUESTION}"


def test_when_bedrock_fails_too_the_gateways_message_answers_or_the_error_names_both(
    served: tuple[StandinEngine, GatewayHandle], fallback_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, gateway = served
    engine.down()
    deploy_prod_endpoint(monkeypatch, gateway.url)

    answer = chat(NOT_IMPORTED).ask(ask())
    monkeypatch.setattr(emulated_sagemaker, "hosting", OneUrlHosting(PROD.name, f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(FallbackFailedError) as failed:
        chat(NOT_IMPORTED).ask(ask())

    # The engine is down and Bedrock refuses the model (not retried): the user still gets the gateway's message.
    assert (answer.source, answer.text) == ("gateway", FALLBACK_MESSAGE)
    assert (answer.fallback_reason, answer.bedrock_error, answer.bedrock_attempts) == (
        "engine_unavailable",
        "ResourceNotFoundException",
        1,
    )
    # No container and no Bedrock: what the chat backend logs and shows its on-call.
    assert str(failed.value) == (
        f"endpoint {PROD.name} could not answer (ServiceUnavailable, 2 tries) and neither could the fallback model "
        "(ResourceNotFoundException, 1 try)"
    )


def test_a_request_the_endpoint_refuses_is_the_callers_to_fix_and_bedrock_is_not_asked(
    served: tuple[StandinEngine, GatewayHandle], fallback_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, gateway = served
    engine.down()
    deploy_prod_endpoint(monkeypatch, gateway.url)

    # Bedrock would answer both (it ignores `tools`), so an error here means it was not asked.
    with pytest.raises(EndpointRequestError) as refused:
        chat(fallback_model).ask(ask(tools=[{"type": "function"}]))
    with pytest.raises(EndpointRequestError) as unknown:
        chat(fallback_model, endpoint="manga-chat-typo").ask(ask())

    assert (refused.value.status, refused.value.code) == (400, "unsupported_field")
    assert str(refused.value).startswith("the endpoint refused the request: unsupported_field (400): ")
    assert (unknown.value.status, unknown.value.code) == (None, "ValidationError")
    assert "manga-chat-typo" in str(unknown.value)
