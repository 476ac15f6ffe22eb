"""A shadowed rollout's data capture, executed from its ASL file on the moto server: the shadow config captures
into the capture bucket under the capture key, only for the shadow bake; the gate's own prompts are not counted
as live requests; capture is off and the captures deleted once compared; prod refuses sampling above its cap.

Emulated by this project (see ``conftest.py``), plus SageMaker data capture (``devtools/emulator_extensions/
sagemaker_runtime.py``). The variants' container is a test double: a local HTTP server that answers every chat
completion the same way (no model can run here; the comparison's path, not its verdict, is what is tested).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from fleetops.promotion.endpoint_invoke import variant_invoker
from tests.integration.hosting_double import OneUrlHosting, serving
from tests.integration.workflows.conftest import HEALTHY, rollout_request

SHADOW_CONFIG = "manga-chat-llama-q4-v7-shadow"
CANARY_CONFIG = "manga-chat-llama-q4-v7-canary"
CHAT = {"messages": [{"role": "user", "content": "Something like Frieren?"}], "max_tokens": 16}


class _SameAnswer(BaseHTTPRequestHandler):
    """Test double for the model container: ``POST /invocations`` answers one fixed chat completion."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"choices": [{"message": {"content": "Try Frieren."}, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def served(rollout: wf.RolloutWorkflow, monkeypatch: pytest.MonkeyPatch) -> Iterator[wf.RolloutWorkflow]:
    with serving(_SameAnswer) as url:
        monkeypatch.setattr(emulated_sagemaker, "hosting", OneUrlHosting(wf.ENDPOINT, url))
        yield rollout


def captures(rollout_id: str = "llama-q4-v7") -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=wf.CAPTURE_BUCKET, Prefix=f"shadow-capture/{rollout_id}/")
    return [item["Key"] for item in listed.get("Contents", [])]


def wait_until(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout_s} s")


def on_shadow_config() -> bool:
    described = boto3.client("sagemaker").describe_endpoint(EndpointName=wf.ENDPOINT)
    return described["EndpointStatus"] == "InService" and described["EndpointConfigName"] == SHADOW_CONFIG


def test_users_requests_are_captured_encrypted_for_the_bake_only_and_deleted_once_compared_gate_prompts_not_counted(
    served: wf.RolloutWorkflow,
) -> None:
    shadow = {"sampling_percent": 100, "seconds": 6, "min_requests": 4, "max_latency_ratio": 100.0}
    sagemaker = boto3.client("sagemaker")
    runtime = boto3.client("sagemaker-runtime")
    key_arn = served.environment["SHADOW_CAPTURE_KEY_ARN"]
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(rollout_request(shadow=shadow))
        wait_until(
            lambda: sagemaker.describe_endpoint(EndpointName=wf.ENDPOINT)["EndpointConfigName"] == CANARY_CONFIG,
            30,
            "the canary deployed",
        )
        # The canary is deployed at weight 0 and the gates could run: nothing is captured yet.
        runtime.invoke_endpoint(EndpointName=wf.ENDPOINT, ContentType="application/json", Body=json.dumps(CHAT))
        wait_until(on_shadow_config, 30, "capture switched on")
        for _ in range(4):  # users, routed by weight (all to the primary)
            runtime.invoke_endpoint(EndpointName=wf.ENDPOINT, ContentType="application/json", Body=json.dumps(CHAT))
        gate = variant_invoker(runtime, wf.ENDPOINT)  # the candidate gate's own adapter, as its prompts go out
        assert all(gate(variant, CHAT).ok for variant in ("primary", "primary", "canary"))
        written = wait_until(lambda: len(captures()) == 7 and captures(), 10, "7 captures written")
        head = boto3.client("s3").head_object(Bucket=wf.CAPTURE_BUCKET, Key=written[0])
        result = wf.wait(execution, timeout_s=90)

    assert result["status"] == "SUCCEEDED", result
    # Captured into the capture bucket, under the capture key.
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", key_arn)
    capture = sagemaker.describe_endpoint_config(EndpointConfigName=SHADOW_CONFIG)["DataCaptureConfig"]
    assert capture["KmsKeyId"] == key_arn
    assert capture["DestinationS3Uri"] == f"s3://{wf.CAPTURE_BUCKET}/shadow-capture/llama-q4-v7"
    # The four users' requests were compared; the gate's three prompts were captured but not counted as live.
    comparison = json.loads(result["output"])["shadow_comparison"]
    assert comparison["result"]["requests"] == 4, comparison
    assert comparison["passed"] is True, comparison["summary"]
    # Compared, then deleted: nothing is left under the rollout's prefix.
    assert captures() == []
    # Capture was on only between StartCapture and EndCapture, and off before the comparison replayed anything.
    history = wf.state_history(execution)
    order = [history.index(s) for s in ("StartCapture", "ShadowBake", "EndCapture", "CompareShadow", "SetWeights")]
    assert order == sorted(order), history
    for config in (CANARY_CONFIG, "manga-chat-llama-q4-v7-final"):
        assert not sagemaker.describe_endpoint_config(EndpointConfigName=config).get("DataCaptureConfig")
    runtime.invoke_endpoint(EndpointName=wf.ENDPOINT, ContentType="application/json", Body=json.dumps(CHAT))
    time.sleep(0.5)
    assert captures() == []


def test_prod_refuses_to_capture_more_than_its_cap_of_users_conversations_and_changes_nothing(
    rollout: wf.RolloutWorkflow,
) -> None:
    prod = "manga-chat-prod"
    config = wf.create_endpoint(prod)
    request = rollout_request(endpoint_name=prod, approval_steps=[100], shadow={"sampling_percent": 50})
    execution = wf.start_rollout(request)
    result = wf.wait(execution, timeout_s=30)

    # What the operator sees: the rollout refused, saying which limit and why.
    assert (result["status"], result["error"]) == ("FAILED", "RolloutInputError"), result
    assert (
        "shadow.sampling_percent: 50 % of live requests is above the limit of 20 % on a prod endpoint "
        "(fleet.yaml rollout_policy.prod.max_shadow_sampling_percent)"
    ) in result["cause"], result["cause"]
    assert wf.state_history(execution)[-1] == "Refused"
    assert boto3.client("sagemaker").describe_endpoint(EndpointName=prod)["EndpointConfigName"] == config
    assert captures() == []
