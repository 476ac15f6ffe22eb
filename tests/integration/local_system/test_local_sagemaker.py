"""A SageMaker endpoint on the emulator that runs the real container (``devtools.local_sagemaker``).

One endpoint for the module: a ``primary`` variant (model v1, the image's three adapters) and a
``canary`` (model v2, whose artifact has one more adapter, served through ``LORA_MODULES``), each a
real ``python -m gateway serve`` with its own CPU vLLM engine. Relies on the emulator extensions
``sagemaker`` (status transitions, rollback) and ``sagemaker_runtime`` (invocations, response streams).
"""

from __future__ import annotations

import doctest
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError, EventStreamError

from devtools import local_sagemaker as local_sagemaker_module
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.emulator_extensions import sagemaker_runtime
from devtools.emulator_extensions.sagemaker_runtime import payload_part, stream_error
from devtools.local_sagemaker import LocalSageMaker, make_adapter, upload_model
from devtools.local_serving import sse_data
from devtools.local_system import wait_for
from devtools.tiny_model import TinyModel
from fleetops.model_contract import ModelContract
from fleetops.prescale.demand_history import DemandHistory
from fleetops.prescale.forecast import SLOT_S
from tests.integration.hosting_double import OneUrlHosting, serving

if TYPE_CHECKING:
    from mypy_boto3_sagemaker_runtime.type_defs import InvokeEndpointOutputTypeDef

container = pytest.mark.container
#: The module's endpoint starts two engines on shared CPUs in its first test's setup.
slow = pytest.mark.timeout(900)

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm:v7"
ROLE = "arn:aws:iam::123456789012:role/manga-llm-sagemaker-execution"
BUCKET = "manga-llm-artifacts"
ENDPOINT = "manga-chat"
EXTRA_ADAPTER = "manga_domain_v2"
#: The canary's adapters plus one its artifact lacks: the gateway refuses to start (exit 1), naming it.
GHOST = {name: f"adapters/{name}" for name in ("general_support", "jp_style", "manga_domain", "ghost")}
QUESTION = {"messages": [{"role": "user", "content": "When is the next One Piece volume out?"}], "max_tokens": 8}


@dataclass(frozen=True)
class Deployed:
    endpoint: str
    config: str
    primary_model: str
    canary_model: str
    canary_data_url: str
    pids: dict[str, int]


def describe(name: str = ENDPOINT) -> dict[str, Any]:
    return dict(boto3.client("sagemaker").describe_endpoint(EndpointName=name))


def wait_settled(name: str = ENDPOINT, timeout_s: float = 120) -> dict[str, Any]:
    settled: dict[str, Any] = wait_for(
        f"{name} leaving Creating/Updating",
        lambda: (d := describe(name))["EndpointStatus"] not in ("Creating", "Updating") and d,
        timeout_s,
    )
    return settled


def model_env(variant: str, version: str, adapters: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    env = ModelContract(endpoint_name=ENDPOINT, variant_name=variant, model_version=version, adapters=adapters)
    # BACKEND_VERSION: what the gateway read before the contract's MODEL_VERSION; harmless after.
    return {**env.environment(), "BACKEND_VERSION": version, **extra}


def create_model(name: str, data_url: str, env: dict[str, str]) -> str:
    boto3.client("sagemaker").create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": data_url, "Environment": env},
    )
    return name


def create_config(name: str, variants: dict[str, tuple[str, float]]) -> str:
    boto3.client("sagemaker").create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": variant,
                "ModelName": model,
                "InstanceType": "ml.g5.2xlarge",
                "InitialInstanceCount": 1,
                "InitialVariantWeight": weight,
            }
            for variant, (model, weight) in variants.items()
        ],
    )
    return name


def invoke(body: dict[str, Any] | None = None, **options: Any) -> tuple[dict[str, Any], InvokeEndpointOutputTypeDef]:
    """InvokeEndpoint; the decoded answer and the raw response."""
    response = boto3.client("sagemaker-runtime").invoke_endpoint(
        EndpointName=ENDPOINT, Body=json.dumps(body or QUESTION), ContentType="application/json", **options
    )
    return json.loads(response["Body"].read()), response


@pytest.fixture(scope="module")
def deployed(
    local_sagemaker: LocalSageMaker, tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Deployed:
    workdir = tmp_path_factory.mktemp("artifacts")
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    extra = make_adapter(tiny_model, EXTRA_ADAPTER, seed=11)
    primary_url = upload_model(tiny_model, f"s3://{BUCKET}/manga-llama/v1/model.tar.gz", workdir)
    canary_adapters = {**tiny_model.adapters, EXTRA_ADAPTER: extra}
    canary_url = upload_model(tiny_model, f"s3://{BUCKET}/manga-llama/v2/model.tar.gz", workdir, canary_adapters)
    primary = create_model("manga-llama-v1-primary", primary_url, model_env("primary", "v1"))
    lora = {name: f"adapters/{name}" for name in canary_adapters}
    canary = create_model("manga-llama-v2-canary", canary_url, model_env("canary", "v2", lora))
    config = create_config(f"{ENDPOINT}-v1-v2", {"primary": (primary, 50), "canary": (canary, 50)})
    boto3.client("sagemaker").create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=config)
    assert describe()["EndpointStatus"] == "Creating"
    status = wait_settled(timeout_s=600)
    assert status["EndpointStatus"] == "InService", status.get("FailureReason")
    pids = {v: local_sagemaker.serving(ENDPOINT, v).pid or 0 for v in ("primary", "canary")}
    return Deployed(ENDPOINT, config, primary, canary, canary_url, pids)


# ---------------------------------------------------------------- no engine needed
@pytest.mark.parametrize("module", [local_sagemaker_module, sagemaker_runtime], ids=lambda m: m.__name__)
def test_docstring_examples(module: Any) -> None:
    assert doctest.testmod(module).failed == 0


def test_event_stream_framing_is_what_botocore_parses() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(payload_part(b"data: {}\n\n") + stream_error("engine gone"))
    messages: list[Any] = list(buffer)  # botocore's stubs type the iteration loosely
    first, second = messages
    assert first.headers == {
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
        ":message-type": "event",
    }
    assert first.payload == b"data: {}\n\n"
    assert second.headers[":exception-type"] == "ModelStreamError"
    assert json.loads(second.payload)["Message"] == "engine gone"


class _SlowStream(BaseHTTPRequestHandler):
    """A container stand-in: three SSE events 0.3 s apart, then ``[DONE]`` or (``{"break": true}``) a cut."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(3):
            data = f"data: {i}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            time.sleep(0.3)
        if not body.get("break"):
            self.wfile.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        self.close_connection = True  # a break: no last chunk, the stream is cut

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def slow_stream_endpoint(emulator: Any) -> Iterator[str]:
    emulated_sagemaker.install()
    sagemaker_runtime.install()
    client = boto3.client("sagemaker")
    client.create_model(ModelName="stub", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "stub:1"})
    create_config("stub-config", {"only": ("stub", 1)})
    client.create_endpoint(EndpointName="stub-stream", EndpointConfigName="stub-config")
    saved = emulated_sagemaker.hosting
    assert saved is None, "runs before the module's local SageMaker hosting starts"
    with serving(_SlowStream) as url:
        emulated_sagemaker.hosting = OneUrlHosting("stub-stream", url)
        try:
            yield "stub-stream"
        finally:
            emulated_sagemaker.hosting = saved


def test_a_response_stream_is_relayed_as_it_comes_and_a_cut_is_a_model_stream_error(slow_stream_endpoint: str) -> None:
    runtime = boto3.client("sagemaker-runtime")

    def stream(body: dict[str, Any]) -> list[tuple[float, bytes]]:
        response = runtime.invoke_endpoint_with_response_stream(
            EndpointName=slow_stream_endpoint, Body=json.dumps(body)
        )
        assert response["InvokedProductionVariant"] == "only"
        return [(time.monotonic(), event["PayloadPart"]["Bytes"]) for event in response["Body"]]

    parts = stream({})
    assert b"".join(data for _, data in parts) == b"data: 0\n\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n"
    assert parts[-1][0] - parts[0][0] > 0.5  # each event reached the client as the container sent it

    with pytest.raises(EventStreamError) as caught:
        stream({"break": True})
    assert caught.value.response["Error"]["Code"] == "ModelStreamError"


# ---------------------------------------------------------------- one endpoint, two variants, real engines
@container
@slow
def test_each_variant_runs_its_own_container_with_the_models_environment_and_artifact(
    deployed: Deployed, local_sagemaker: LocalSageMaker
) -> None:
    primary = local_sagemaker.serving(ENDPOINT, "primary")
    canary = local_sagemaker.serving(ENDPOINT, "canary")
    assert primary.alive() and canary.alive() and primary.pid != canary.pid
    assert (primary.model_name, canary.model_name) == (deployed.primary_model, deployed.canary_model)
    assert primary.environment["MODEL_VERSION"] == "v1" and canary.environment["MODEL_VERSION"] == "v2"
    assert canary.process_env["LORA_MODULES"] == canary.environment["LORA_MODULES"]  # passed through unchanged
    assert primary.model_dir is not None and canary.model_dir is not None
    assert (primary.model_dir / "config.json").exists()
    assert not (primary.model_dir / "adapters" / EXTRA_ADAPTER).exists()
    assert (canary.model_dir / "adapters" / EXTRA_ADAPTER / "adapter_config.json").exists()
    assert {c.variant_name for c in local_sagemaker.containers(ENDPOINT)} == {"primary", "canary"}


@container
def test_invocations_reach_the_variant_and_name_its_version(deployed: Deployed) -> None:
    for variant, version in (("primary", "v1"), ("canary", "v2")):
        answer, response = invoke(TargetVariant=variant)
        assert response["InvokedProductionVariant"] == variant
        assert answer["backend"]["version"] == version
        assert answer["choices"][0]["message"]["content"]
        assert response["ContentType"].startswith("application/json")
        assert f"backend_version={version}" in response["CustomAttributes"]


@container
def test_what_a_variant_served_reaches_the_pre_scale_reader_beside_its_queue(deployed: Deployed) -> None:
    """Nothing here writes a datapoint: the runtime publishes SageMaker's per-variant invocations, the container its
    queue (EMF), and the pre-scale reader reads both back per minute (the served rate's input)."""
    history, since = DemandHistory(), datetime.now(UTC) - timedelta(minutes=30)

    def served() -> float:
        until = datetime.now(UTC) + timedelta(minutes=10)  # the slot now running included
        return sum(rps or 0.0 for rps in history.invocations(ENDPOINT, "primary", since, until).rps) * SLOT_S

    before = served()
    for _ in range(3):
        invoke(TargetVariant="primary")
    assert served() == pytest.approx(before + 3)  # the forecast's demand: every request, once
    last = datetime.now(UTC).replace(second=0, microsecond=0)
    minute = wait_for(
        "the minute of the last request with the container's queue beside it",
        lambda: next(
            (m for m in history.minute_loads(ENDPOINT, "primary", since, last + timedelta(minutes=1)) if m.at == last),
            None,
        ),
        30,
    )
    assert minute.invocations_per_instance_rps * 60 >= 1  # one instance: the requests themselves
    assert minute.queue_per_instance >= 0  # vLLM's num_requests_waiting, from the container's own EMF


@container
def test_an_unknown_target_variant_is_a_validation_error(deployed: Deployed) -> None:
    with pytest.raises(ClientError) as caught:
        invoke(TargetVariant="shadow")
    assert caught.value.response["Error"]["Code"] == "ValidationError"
    assert "shadow" in caught.value.response["Error"]["Message"]


@container
def test_weights_split_the_traffic_and_a_weight_update_starts_nothing(
    deployed: Deployed, local_sagemaker: LocalSageMaker
) -> None:
    client = boto3.client("sagemaker")

    def set_weights(primary: float, canary: float) -> None:
        client.update_endpoint_weights_and_capacities(
            EndpointName=ENDPOINT,
            DesiredWeightsAndCapacities=[
                {"VariantName": "primary", "DesiredWeight": primary},
                {"VariantName": "canary", "DesiredWeight": canary},
            ],
        )
        assert wait_settled()["EndpointStatus"] == "InService"

    set_weights(0, 100)
    assert {invoke()[1]["InvokedProductionVariant"] for _ in range(6)} == {"canary"}
    set_weights(50, 50)
    # All 24 on one side happens with probability 2 * 0.5**24.
    assert {invoke()[1]["InvokedProductionVariant"] for _ in range(24)} == {"primary", "canary"}
    assert {v: local_sagemaker.serving(ENDPOINT, v).pid for v in deployed.pids} == deployed.pids


@container
def test_the_canarys_extra_adapter_answers_only_on_the_canary(deployed: Deployed) -> None:
    greedy = {**QUESTION, "temperature": 0}
    extra, _ = invoke({**greedy, "adapter": EXTRA_ADAPTER}, TargetVariant="canary")
    base, _ = invoke({**greedy, "adapter": "manga_domain"}, TargetVariant="canary")
    assert extra["backend"]["adapter"] == EXTRA_ADAPTER
    # Another seed, other LoRA weights: the same greedy question gets another answer.
    assert extra["choices"][0]["message"]["content"] != base["choices"][0]["message"]["content"]

    with pytest.raises(ClientError) as caught:
        invoke({**QUESTION, "adapter": EXTRA_ADAPTER}, TargetVariant="primary")
    error: dict[str, Any] = dict(caught.value.response)  # the modeled fields are not in the stubs
    assert error["Error"]["Code"] == "ModelError"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert error["OriginalStatusCode"] == 400
    assert json.loads(error["OriginalMessage"])["error"]["code"] == "unknown_adapter"
    assert error["LogStreamArn"].endswith(f":log-group:/aws/sagemaker/Endpoints/{ENDPOINT}")


@container
def test_response_streaming_yields_payload_parts_that_form_the_sse_stream(deployed: Deployed) -> None:
    # 128 tokens (min_tokens: the gateway refuses ignore_eos) take long enough to arrive in several reads.
    body = {**QUESTION, "max_tokens": 128, "min_tokens": 128, "stream": True}
    response = boto3.client("sagemaker-runtime").invoke_endpoint_with_response_stream(
        EndpointName=ENDPOINT, Body=json.dumps(body), ContentType="application/json", TargetVariant="canary"
    )
    events = list(response["Body"])
    assert events and all(set(event) == {"PayloadPart"} for event in events)
    text = b"".join(event["PayloadPart"]["Bytes"] for event in events).decode()
    data = sse_data(text)
    assert data[-1] == "[DONE]"
    assert json.loads(data[0])["backend"]["version"] == "v2"
    assert sum('"content":' in d for d in data) >= 100
    assert len(events) > 1  # relayed as the container sent it, not as one blob at the end
    assert response["InvokedProductionVariant"] == "canary"
    assert response["ContentType"].startswith("text/event-stream")


@container
def test_container_output_goes_to_cloudwatch_logs_as_sagemaker_ships_it(
    deployed: Deployed, local_sagemaker: LocalSageMaker
) -> None:
    logs = boto3.client("logs")
    group = f"/aws/sagemaker/Endpoints/{ENDPOINT}"
    primary = local_sagemaker.serving(ENDPOINT, "primary")
    assert primary.log_stream == f"primary/{primary.instance_id}" and primary.instance_id.startswith("i-")

    def shipped() -> list[str]:
        local_sagemaker.flush_logs()
        events = logs.get_log_events(logGroupName=group, logStreamName=primary.log_stream)["events"]
        return [e["message"] for e in events]

    def has_both() -> bool:
        messages = shipped()
        emf = any(m.startswith("{") and "_aws" in json.loads(m) for m in messages)  # stdout: EMF
        return emf and any("warm-up done" in m for m in messages)  # stderr

    wait_for("an EMF line (stdout) and the warm-up line (stderr) in CloudWatch Logs", has_both, 60)
    streams = {s["logStreamName"] for s in logs.describe_log_streams(logGroupName=group)["logStreams"]}
    assert {primary.log_stream, local_sagemaker.serving(ENDPOINT, "canary").log_stream} <= streams


@container
def test_a_bad_model_fails_a_new_endpoint(deployed: Deployed) -> None:
    broken = create_model("manga-llama-ghost", deployed.canary_data_url, model_env("canary", "v3", GHOST))
    config = create_config("broken-config", {"canary": (broken, 1)})
    boto3.client("sagemaker").create_endpoint(EndpointName="manga-chat-broken", EndpointConfigName=config)
    status = wait_settled("manga-chat-broken", timeout_s=90)
    assert status["EndpointStatus"] == "Failed"
    assert "did not pass the ping health check" in status["FailureReason"]
    assert "ghost" in status["FailureReason"]


@container
def test_an_update_whose_container_cannot_start_rolls_back(deployed: Deployed, local_sagemaker: LocalSageMaker) -> None:
    broken = create_model("manga-llama-v3-canary", deployed.canary_data_url, model_env("canary", "v3", GHOST))
    config = create_config(f"{ENDPOINT}-v1-v3", {"primary": (deployed.primary_model, 50), "canary": (broken, 50)})
    boto3.client("sagemaker").update_endpoint(EndpointName=ENDPOINT, EndpointConfigName=config)
    assert describe()["EndpointStatus"] == "Updating"

    status = wait_settled(timeout_s=90)
    assert status["EndpointStatus"] == "InService"
    assert status["EndpointConfigName"] == deployed.config  # the previous config still serves
    assert "did not pass the ping health check" in status["FailureReason"]
    assert "ghost" in status["FailureReason"]  # the container's own words, from its stderr
    failed = [c for c in local_sagemaker.containers(ENDPOINT, "canary", running_only=False) if c.model_name == broken]
    assert len(failed) == 1 and not failed[0].alive() and failed[0].exit_code() == 1
    assert {v: local_sagemaker.serving(ENDPOINT, v).pid for v in deployed.pids} == deployed.pids
    assert invoke(TargetVariant="canary")[0]["backend"]["version"] == "v2"


@container
def test_removing_a_variant_drains_and_stops_its_container(deployed: Deployed, local_sagemaker: LocalSageMaker) -> None:
    canary = local_sagemaker.serving(ENDPOINT, "canary")
    config = create_config(f"{ENDPOINT}-v1-only", {"primary": (deployed.primary_model, 1)})
    boto3.client("sagemaker").update_endpoint(EndpointName=ENDPOINT, EndpointConfigName=config)
    status = wait_settled()
    assert (status["EndpointStatus"], status["EndpointConfigName"]) == ("InService", config)
    assert "FailureReason" not in status  # a successful update clears the last failure

    wait_for("the removed canary's process to exit", lambda: not canary.alive(), 60)
    assert canary.exit_code() == 0  # SIGTERM: drained and exited cleanly
    assert local_sagemaker.serving(ENDPOINT, "primary").pid == deployed.pids["primary"]
    assert [c.variant_name for c in local_sagemaker.containers(ENDPOINT)] == ["primary"]
    with pytest.raises(ClientError) as caught:
        invoke(TargetVariant="canary")
    assert caught.value.response["Error"]["Code"] == "ValidationError"
    assert invoke()[1]["InvokedProductionVariant"] == "primary"


@container
def test_deleting_the_endpoint_stops_every_container(deployed: Deployed, local_sagemaker: LocalSageMaker) -> None:
    primary = local_sagemaker.serving(ENDPOINT, "primary")
    boto3.client("sagemaker").delete_endpoint(EndpointName=ENDPOINT)
    wait_for("the primary's process to exit", lambda: not primary.alive(), 60)
    assert primary.exit_code() == 0
    assert local_sagemaker.containers(ENDPOINT) == []
    with pytest.raises(ClientError) as caught:
        invoke()
    assert caught.value.response["Error"]["Message"] == f"Endpoint {ENDPOINT} of account 123456789012 not found."
