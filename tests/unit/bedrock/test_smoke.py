"""Smoke-test verdicts and the Converse / S3 adapters (botocore's Stubber checks calls against the real API model)."""

from __future__ import annotations

import io
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from fleetops.aws.retry import FAST_RETRY
from fleetops.bedrock.adapters import BedrockConverse, S3ArtifactStore
from fleetops.bedrock.models import Reply, SmokeTestRequest
from fleetops.bedrock.smoke import SmokeTestError, judge, run_smoke_test
from tests.conftest import load_event

ARN = "arn:aws:bedrock:us-east-1:123456789012:imported-model/k2x9q7ab3c4d"


def request(**changes: object) -> SmokeTestRequest:
    return SmokeTestRequest.model_validate(load_event("bedrock_smoke_test") | changes)


@pytest.mark.parametrize(
    ("reply", "ok", "detail"),
    [
        (Reply(text="Try Dungeon Meshi.", stop_reason="end_turn"), True, "ok"),
        (Reply(text="Try Dungeon", stop_reason="max_tokens"), True, "ok"),
        (Reply(text="   ", stop_reason="end_turn"), False, "empty answer"),
        (Reply(text="...", stop_reason="content_filtered"), False, "stop reason 'content_filtered'"),
        (Reply(text="{", stop_reason="malformed_model_output"), False, "stop reason 'malformed_model_output'"),
    ],
)
def test_judge(reply: Reply, ok: bool, detail: str) -> None:
    result = judge("p", reply)
    assert (result.ok, result.detail) == (ok, detail)


def test_all_good_answers_pass() -> None:
    asked: list[tuple[str, str, int]] = []

    def ask(arn: str, prompt: str, max_tokens: int) -> Reply:
        asked.append((arn, prompt, max_tokens))
        return Reply(text=f"answer to {prompt}", stop_reason="end_turn")

    report = run_smoke_test(request(), ask)
    assert report.verdict == "passed" and len(report.results) == 2
    assert asked == [(ARN, p, 64) for p in request().prompts]


def test_one_bad_answer_fails_and_every_prompt_is_still_asked() -> None:
    replies = iter([Reply(text="", stop_reason="end_turn"), Reply(text="fine", stop_reason="end_turn")])
    with pytest.raises(SmokeTestError) as caught:
        run_smoke_test(request(), lambda *_: next(replies))
    assert caught.value.report.verdict == "failed"
    assert [r.ok for r in caught.value.report.results] == [False, True]
    assert str(caught.value).startswith(f"1 of 2 smoke prompt(s) failed on {ARN}: 'Recommend one manga")


def test_an_exception_counts_as_a_failed_prompt() -> None:
    def ask(arn: str, prompt: str, max_tokens: int) -> Reply:
        raise TimeoutError("read timed out")

    with pytest.raises(SmokeTestError, match="TimeoutError: read timed out"):
        run_smoke_test(request(), ask)


def test_architectures_without_converse_are_skipped_not_failed() -> None:
    report = run_smoke_test(request(converse_supported=False), lambda *_: pytest.fail("must not be asked"))
    assert report.verdict == "skipped" and "InvokeModel" in report.reason


def test_smoke_request_rejects_a_non_imported_model_arn() -> None:
    with pytest.raises(ValueError, match="imported_model_arn"):
        request(imported_model_arn="anthropic.claude-3-haiku")


def offline(service: str) -> Any:
    # Explicit fake credentials: without them botocore would look for instance metadata on the network.
    make: Any = boto3.client  # typed per service name literal; any name is fine here
    return make(service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


def converse_response(text: str) -> dict[str, object]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 12, "outputTokens": 5, "totalTokens": 17},
        "metrics": {"latencyMs": 340},
    }


def test_converse_adapter_sends_one_user_message_and_reads_the_answer() -> None:
    client = offline("bedrock-runtime")
    with Stubber(client) as stub:
        stub.add_response(
            "converse",
            converse_response("Dungeon Meshi."),
            {
                "modelId": ARN,
                "messages": [{"role": "user", "content": [{"text": "hi"}]}],
                "inferenceConfig": {"maxTokens": 32, "temperature": 0.0},
            },
        )
        reply = BedrockConverse(client, retry=FAST_RETRY).ask(ARN, "hi", 32)
        stub.assert_no_pending_responses()
    assert reply == Reply(
        text="Dungeon Meshi.", stop_reason="end_turn", input_tokens=12, output_tokens=5, latency_ms=340
    )


def test_converse_adapter_waits_for_a_cold_model() -> None:
    client = offline("bedrock-runtime")
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ModelNotReadyException", "Model is loading", 429)
        stub.add_response(
            "converse", converse_response("ok"), {"modelId": ARN, "messages": ANY, "inferenceConfig": ANY}
        )
        assert BedrockConverse(client, retry=FAST_RETRY).ask(ARN, "hi", 8).text == "ok"
        stub.assert_no_pending_responses()


def test_converse_adapter_does_not_retry_a_validation_error() -> None:
    client = offline("bedrock-runtime")
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ValidationException", "maxTokens too large", 400)
        with pytest.raises(client.exceptions.ValidationException):
            BedrockConverse(client, retry=FAST_RETRY).ask(ARN, "hi", 8)
        stub.assert_no_pending_responses()


def test_s3_store_lists_relative_names_across_pages_and_reads_text() -> None:
    client = offline("s3")
    prefix = "bedrock-imports/m/"
    with Stubber(client) as stub:
        stub.add_response(
            "list_objects_v2",
            {
                "Contents": [{"Key": prefix, "Size": 0}, {"Key": prefix + "config.json", "Size": 40}],
                "IsTruncated": True,
                "NextContinuationToken": "t",
            },
            {"Bucket": "b", "Prefix": prefix},
        )
        stub.add_response(
            "list_objects_v2",
            {"Contents": [{"Key": prefix + "model.safetensors", "Size": 4096}], "IsTruncated": False},
            {"Bucket": "b", "Prefix": prefix, "ContinuationToken": "t"},
        )
        raw = b'{"architectures": []}'
        body = StreamingBody(io.BytesIO(raw), len(raw))
        stub.add_response("get_object", {"Body": body}, {"Bucket": "b", "Key": prefix + "config.json"})
        store = S3ArtifactStore(client)
        listed = store.list_objects("b", prefix)
        text = store.read_text("b", prefix + "config.json")
        stub.assert_no_pending_responses()
    assert [(o.name, o.size) for o in listed] == [("config.json", 40), ("model.safetensors", 4096)]
    assert text == '{"architectures": []}'
