"""The caller-side fallback's decisions (``clients.fallback_client``) on what the gateway really answers.

The gateway's answers come from its own invocation service with the engine down (``DownEngineDouble``, a test
double: no engine runs in a unit test), once with no fallback model (prod: network-isolated) and once with one
that answered (a container with network). SageMaker Runtime and Bedrock are botocore's ``Stubber`` (test doubles
with no network, which still check each request against botocore's service model): it relays those answers and
scripts Bedrock's throttling, which the emulator cannot produce.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from typing import Any, Literal

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from clients.converse_request import ChatBodyError
from clients.fallback_client import FALLBACK_FINISH_REASON, FallbackChat
from gateway import openai_wire
from gateway.config import GatewayConfig
from gateway.metrics import GatewayMetrics
from gateway.prompt import PromptBuilder
from gateway.routing import Router
from gateway.serving import InvocationService
from gateway.supervisor import Engine, EngineState
from gateway.upstream import Upstream

MODEL = "arn:aws:bedrock:us-east-1:123456789012:imported-model/abc"
BODY = {"messages": [{"role": "user", "content": "Anything like Frieren?"}], "max_tokens": 32}
THROTTLED = "ThrottlingException"


def offline(service: Literal["sagemaker-runtime", "bedrock-runtime"]) -> Any:
    """A client with credentials of no account: one looks for some when built (instance metadata is network)."""
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="stub", aws_secret_access_key="stub")


class DownEngineDouble(Engine):
    """An engine being restarted: every request takes the gateway's fallback."""

    def __init__(self) -> None:
        self.base_url = "http://127.0.0.1:9"  # never called: an unavailable engine is not sent requests
        self.state = EngineState.RESTARTING

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


async def _container_bedrock(messages: list[dict[str, str]], max_tokens: int) -> str:
    return "answered by the container's own Bedrock fallback"


def gateway_answer(config: GatewayConfig, builder: PromptBuilder, with_bedrock: bool) -> bytes:
    service = InvocationService(
        builder,
        Router(config.routing),
        DownEngineDouble(),
        upstream=Upstream(),
        metrics=GatewayMetrics(),
        containment=config.containment,
        backend_version="v7",
        fallback_model=_container_bedrock if with_bedrock else None,
    )
    response = asyncio.run(service.invoke(json.dumps(BODY).encode(), time.perf_counter()))
    assert response.status_code == 200
    return bytes(response.body)


class Stubbed:
    """The two runtime clients under Stubber, and the helper built on them (no waits between tries)."""

    def __init__(self) -> None:
        self.sagemaker = offline("sagemaker-runtime")
        self.bedrock = offline("bedrock-runtime")
        self.endpoint, self.converse = Stubber(self.sagemaker), Stubber(self.bedrock)
        self.chat = FallbackChat(
            "manga-chat-prod", MODEL, sagemaker_runtime=self.sagemaker, bedrock_runtime=self.bedrock, backoff_s=0
        )

    def endpoint_answers(self, body: bytes) -> None:
        answer = {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentType": "application/json"}
        self.endpoint.add_response("invoke_endpoint", answer)

    def bedrock_answers(self, text: str) -> None:
        output = {"message": {"role": "assistant", "content": [{"text": text}]}}
        usage = {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8}
        reply = {"output": output, "stopReason": "end_turn", "usage": usage, "metrics": {"latencyMs": 9}}
        self.converse.add_response("converse", reply)

    def bedrock_throttles(self, times: int) -> None:
        for _ in range(times):
            self.converse.add_client_error("converse", THROTTLED, "Too many requests", http_status_code=429)


@pytest.fixture
def stubbed() -> Iterator[Stubbed]:
    stubs = Stubbed()
    with stubs.endpoint, stubs.converse:
        yield stubs
        stubs.endpoint.assert_no_pending_responses()
        stubs.converse.assert_no_pending_responses()  # every scripted Bedrock answer was asked for


def test_the_marker_is_the_gateways_own_finish_reason() -> None:
    assert FALLBACK_FINISH_REASON == openai_wire.FINISH_FALLBACK


def test_an_isolated_gateways_fallback_message_is_replaced_by_bedrocks_answer_after_throttling(
    stubbed: Stubbed, config: GatewayConfig, builder: PromptBuilder
) -> None:
    stubbed.endpoint_answers(gateway_answer(config, builder, with_bedrock=False))
    stubbed.bedrock_throttles(2)
    stubbed.bedrock_answers("Try Mushishi.")

    answer = stubbed.chat.ask(BODY)

    assert (answer.text, answer.source, answer.fallback_reason) == ("Try Mushishi.", "bedrock", "engine_unavailable")
    assert (answer.endpoint_attempts, answer.bedrock_attempts) == (1, 3)  # throttled twice, answered on the third


def test_throttled_on_every_try_the_gateways_message_still_answers(
    stubbed: Stubbed, config: GatewayConfig, builder: PromptBuilder
) -> None:
    stubbed.endpoint_answers(gateway_answer(config, builder, with_bedrock=False))
    stubbed.bedrock_throttles(3)

    answer = stubbed.chat.ask(BODY)

    assert (answer.text, answer.source) == (config.containment.fallback_message, "gateway")
    assert (answer.bedrock_error, answer.bedrock_attempts) == (THROTTLED, 3)


def test_a_gateway_that_already_asked_bedrock_is_not_doubled(
    stubbed: Stubbed, config: GatewayConfig, builder: PromptBuilder
) -> None:
    stubbed.endpoint_answers(gateway_answer(config, builder, with_bedrock=True))  # no Bedrock answer is scripted

    answer = stubbed.chat.ask(BODY)

    assert (answer.text, answer.source, answer.bedrock_attempts) == (
        "answered by the container's own Bedrock fallback",
        "endpoint",
        0,
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"endpoint_name": "manga chat"}, "endpoint_name 'manga chat' is not a SageMaker endpoint name"),
        ({"fallback_model_id": ""}, "fallback_model_id '': a Bedrock model ID or ARN is required"),
        ({"bedrock_attempts": 0}, "endpoint_attempts and bedrock_attempts count the first try: at least 1"),
        ({"backoff_s": 3.0}, "backoff_s must be 0 or more and at most max_backoff_s"),
    ],
)
def test_a_misconfigured_helper_fails_when_built_naming_the_setting(arguments: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {"endpoint_name": "manga-chat-prod", "fallback_model_id": MODEL} | arguments
    with pytest.raises(ValueError) as refused:
        FallbackChat(
            bedrock_runtime=offline("bedrock-runtime"),
            sagemaker_runtime=offline("sagemaker-runtime"),
            **settings,
        )

    assert str(refused.value) == message


def test_a_stream_or_a_body_that_is_not_an_object_is_refused_before_any_call(stubbed: Stubbed) -> None:
    with pytest.raises(ChatBodyError) as streamed:
        stubbed.chat.ask({**BODY, "stream": True})
    with pytest.raises(ChatBodyError) as listed:
        stubbed.chat.ask([BODY])  # type: ignore[arg-type]

    assert str(streamed.value) == "stream: ask() answers JSON; a stream that fails mid-way cannot be answered again"
    assert str(listed.value) == "body: a JSON object is expected, got list"
