"""The gateway's Bedrock fallback (``gateway.fallback.BedrockFallback``) against the emulator's Converse.

moto 5.2.5 has no Converse: it is emulated by this project (``devtools/emulator_extensions/bedrock.py``), for
imported models, reached over HTTP through the moto server and serialised from botocore's real bedrock-runtime
service model; it answers ``[emulated Converse: <model>] You asked: <the user's words>``, cut at ``maxTokens``
words, and ``ResourceNotFoundException`` for a model that was not imported. The model is imported here through
the emulated Bedrock Custom Model Import API, as the import workflow does.

The engine is ``DownEngineDouble`` (a test double): a GPU engine cannot run here, and the path under test is
the one taken when no engine answers. Everything else is the gateway's own: the invocation service with its
budget, retry and fallback, the recorder, the log line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

import boto3
import pytest
from botocore.exceptions import ClientError
from starlette.responses import Response

from devtools.emulator_extensions import bedrock as emulated_bedrock
from devtools.tiny_model import write_tokenizer
from fleetops.metrics import MetricName
from gateway.config import DEFAULT_CONFIG, GatewayConfig, load_gateway_config
from gateway.fallback import BedrockFallback
from gateway.metrics import GatewayMetrics
from gateway.prompt import PromptBuilder
from gateway.routing import Router
from gateway.serving import InvocationService
from gateway.supervisor import Engine, EngineState
from gateway.tokens import TokenCounter
from gateway.upstream import Upstream

BUCKET = "fallback-model-artifacts"
QUESTION = "when does volume twelve of the pirate saga ship"
NOT_IMPORTED = "arn:aws:bedrock:us-east-1:123456789012:imported-model/not-imported"


class DownEngineDouble(Engine):
    """An engine being restarted: not available, so every request takes the fallback."""

    def __init__(self) -> None:
        self.base_url = "http://127.0.0.1:9"  # never called: an unavailable engine is not sent requests
        self.state = EngineState.RESTARTING

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


@pytest.fixture
def imported_model(monkeypatch: pytest.MonkeyPatch) -> str:
    """A model imported through the emulated Custom Model Import API; its ARN."""
    emulated_bedrock.install()
    monkeypatch.setattr(emulated_bedrock.behaviour, "polls_in_progress", 0)
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
    assert described["status"] == "Completed", described
    return str(described["importedModelArn"])


@pytest.fixture(scope="module")
def config() -> GatewayConfig:
    return load_gateway_config(DEFAULT_CONFIG)


@pytest.fixture(scope="module")
def builder(config: GatewayConfig, tmp_path_factory: pytest.TempPathFactory) -> PromptBuilder:
    folder = tmp_path_factory.mktemp("tokenizer")
    write_tokenizer(folder)
    return PromptBuilder(TokenCounter(folder), config.system_prompt, config.budget)


@pytest.fixture
def metrics() -> GatewayMetrics:
    return GatewayMetrics()


Answer = Callable[[str, dict[str, object]], Response]


@pytest.fixture
def serve(config: GatewayConfig, builder: PromptBuilder, metrics: GatewayMetrics) -> Answer:
    """A function answering one invocation with the engine down and the given Bedrock model as the fallback."""

    def answer(model_id: str, body: dict[str, object]) -> Response:
        service = InvocationService(
            builder,
            Router(config.routing),
            DownEngineDouble(),
            upstream=Upstream(),
            metrics=metrics,
            containment=config.containment,
            backend_version="v7",
            fallback_model=BedrockFallback(model_id, boto3.client("bedrock-runtime")),
        )
        return asyncio.run(service.invoke(json.dumps(body).encode(), time.perf_counter()))

    return answer


def ask(**fields: object) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": QUESTION}], **fields}


def test_the_fallback_answers_with_the_models_converse_reply(imported_model: str) -> None:
    fallback = BedrockFallback(imported_model, boto3.client("bedrock-runtime"))
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": QUESTION}]

    text = asyncio.run(fallback(messages, 64))
    cut = asyncio.run(fallback(messages, 5))

    assert text == f"[emulated Converse: manga-fallback] You asked: {QUESTION}"
    assert cut == " ".join(text.split()[:5])  # maxTokens reached the service


def test_a_converse_failure_is_the_services_error(imported_model: str) -> None:
    fallback = BedrockFallback(NOT_IMPORTED, boto3.client("bedrock-runtime"))

    with pytest.raises(ClientError) as failed:
        asyncio.run(fallback([{"role": "user", "content": QUESTION}], 64))

    assert failed.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_with_the_engine_down_the_answer_comes_from_bedrock(
    imported_model: str, serve: Answer, metrics: GatewayMetrics
) -> None:
    response = serve(imported_model, ask())
    streamed = serve(imported_model, ask(stream=True))

    assert response.status_code == 200
    assert (response.headers["x-backend-version"], response.headers["x-gateway-fallback"]) == (
        "bedrock",
        "engine_unavailable",
    )
    body = json.loads(bytes(response.body))
    assert body["choices"][0]["finish_reason"] == "fallback"
    assert body["choices"][0]["message"]["content"] == f"[emulated Converse: manga-fallback] You asked: {QUESTION}"
    assert streamed.headers["x-backend-version"] == "bedrock"
    assert f"You asked: {QUESTION}" in bytes(streamed.body).decode()
    counters = metrics.drain().counters
    assert (counters[MetricName.FALLBACKS], counters.get(MetricName.BEDROCK_FALLBACK_ERRORS, 0.0)) == (2.0, 0.0)


def test_when_bedrock_fails_the_configured_message_answers_and_the_failure_is_counted_and_logged(
    imported_model: str,
    serve: Answer,
    metrics: GatewayMetrics,
    config: GatewayConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway.serving"):
        response = serve(NOT_IMPORTED, ask())

    assert response.status_code == 200
    assert (response.headers["x-backend-version"], response.headers["x-gateway-fallback"]) == (
        "fallback",
        "engine_unavailable",
    )
    assert json.loads(bytes(response.body))["choices"][0]["message"]["content"] == config.containment.fallback_message
    counters = metrics.drain().counters
    assert (counters[MetricName.FALLBACKS], counters[MetricName.BEDROCK_FALLBACK_ERRORS]) == (1.0, 1.0)
    [record] = [r for r in caplog.records if getattr(r, "event", None) == "fallback_model_failed"]
    assert record.__dict__["error"] == record.__dict__["error_class"] == "ResourceNotFoundException"
    logged = " ".join(r.getMessage() + json.dumps(r.__dict__, default=str) for r in caplog.records)
    assert QUESTION not in logged and "volume twelve" not in logged  # the prompt never reaches a log
