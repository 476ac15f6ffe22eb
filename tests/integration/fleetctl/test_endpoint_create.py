"""``fleetctl endpoint create``: the first endpoint from fleet.yaml on the emulator (moto over HTTP), no stack needed.

Emulated by this project: ml.g5 instance types (``devtools/emulator_extensions/sagemaker.py``; moto's own list
predates them). moto makes an endpoint InService at once; a real one takes minutes, which ``--wait`` sits out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from devtools import emulator_extensions
from devtools import rollout_workflow as wf
from devtools.local_system import wait_for
from fleetctl import awsclients
from fleetctl.errors import ExitCode
from fleetops.aws.autoscaling import DIMENSION, NAMESPACE, resource_id
from tests.integration.fleetctl.conftest import check_schema

FLEET = str(wf.FLEET)  # manga-chat: hosting and initial_model set, not the schema's defaults
HOSTING = {
    "InferenceAmiVersion": "al2-ami-sagemaker-inference-gpu-3-1",
    "ContainerStartupHealthCheckTimeoutInSeconds": 900,
    "ModelDataDownloadTimeoutInSeconds": 600,
}
DATA = "s3://manga-llm-artifacts/models/manga-llama/v6/model.tar.gz"


@pytest.fixture(autouse=True)
def _real_instance_types() -> Iterator[None]:
    emulator_extensions.install()
    yield


def create(cli: Any, *args: str) -> Any:
    return cli("--fleet", FLEET, "endpoint", "create", *args)


def targets() -> list[dict[str, Any]]:
    found = boto3.client("application-autoscaling").describe_scalable_targets(ServiceNamespace=NAMESPACE)
    return [dict(target) for target in found["ScalableTargets"]]


def instance_counts() -> tuple[str, int]:
    """The endpoint's status and its primary variant's current instance count."""
    described = boto3.client("sagemaker").describe_endpoint(EndpointName="manga-chat")
    return described["EndpointStatus"], described["ProductionVariants"][0]["CurrentInstanceCount"]


def nothing_created() -> bool:
    sagemaker = boto3.client("sagemaker")
    return not (
        sagemaker.list_models()["Models"]
        or sagemaker.list_endpoint_configs()["EndpointConfigs"]
        or sagemaker.list_endpoints()["Endpoints"]
        or targets()
    )


def sent_models() -> list[dict[str, Any]]:
    """CreateModel's parameters as fleetctl's client sends them (moto does not return EnableNetworkIsolation)."""
    sent: list[dict[str, Any]] = []
    awsclients.client("sagemaker").meta.events.register(
        "provide-client-params.sagemaker.CreateModel", lambda params, **_: sent.append(dict(params))
    )
    return sent


def test_creates_model_config_endpoint_and_scalable_target_from_fleet_yaml(cli: Any) -> None:
    sent = sent_models()
    shown = create(cli, "manga-chat", "--model-data-url", DATA, "--json")

    assert shown.code == ExitCode.OK, shown.err
    report = shown.json()
    check_schema(report, "endpoint_create")
    assert (report["outcome"], report["endpoint_status"]) == ("created", "InService")
    sagemaker = boto3.client("sagemaker")
    assert sagemaker.describe_endpoint(EndpointName="manga-chat")["EndpointConfigName"] == "manga-chat-v6-config"
    [variant] = sagemaker.describe_endpoint_config(EndpointConfigName="manga-chat-v6-config")["ProductionVariants"]
    # fleet.yaml's primary variant: its instance type, its floor as the first count, the endpoint's hosting.
    assert variant == {
        "VariantName": "primary",
        "ModelName": "manga-chat-v6-primary",
        "InstanceType": "ml.g5.2xlarge",
        "InitialInstanceCount": 2,
        "InitialVariantWeight": 1.0,
        **HOSTING,
    }
    model = sagemaker.describe_model(ModelName="manga-chat-v6-primary")
    assert model["ExecutionRoleArn"] == wf.ROLE
    assert [m["EnableNetworkIsolation"] for m in sent] == [True]  # the environment's rollout_policy, as rollouts
    assert model["PrimaryContainer"]["Image"] == f"{wf.IMAGE_REPOSITORY}:v6"
    assert model["PrimaryContainer"]["ModelDataUrl"] == DATA
    # The container's contract, as the rollout writes it: it refuses to start without it.
    env = model["PrimaryContainer"]["Environment"]
    assert (env["ENDPOINT_NAME"], env["VARIANT_NAME"], env["MODEL_VERSION"]) == ("manga-chat", "primary", "v6")
    [target] = targets()
    assert target["ResourceId"] == resource_id("manga-chat", "primary") and target["ScalableDimension"] == DIMENSION
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 12)  # fleet.yaml's floor and cap
    assert report["created"] == [
        "model manga-chat-v6-primary",
        "endpoint config manga-chat-v6-config",
        "endpoint manga-chat",
        "scalable target manga-chat/primary",
    ]


def test_an_existing_endpoint_is_reported_not_recreated_and_its_raised_capacity_kept(cli: Any) -> None:
    assert create(cli, "manga-chat").code == ExitCode.OK
    # The pre-scaler raised the floor since; a second run must not put it back.
    boto3.client("application-autoscaling").register_scalable_target(
        ServiceNamespace=NAMESPACE,
        ResourceId=resource_id("manga-chat", "primary"),
        ScalableDimension=DIMENSION,
        MinCapacity=5,
        MaxCapacity=12,
    )
    scaled_out = wait_for("the scale-out to 5", lambda: instance_counts() == ("InService", 5), 30)

    again = create(cli, "manga-chat", "--model-version", "v7")

    assert again.code == ExitCode.OK, again.err
    assert "endpoint manga-chat exists already, kept as it is: InService, config manga-chat-v6-config" in again.out
    assert scaled_out and instance_counts() == ("InService", 5)
    assert "already registered, kept" in again.out and "nothing (all of it was there)" in again.out
    assert [m["ModelName"] for m in boto3.client("sagemaker").list_models()["Models"]] == ["manga-chat-v6-primary"]
    assert [(t["MinCapacity"], t["MaxCapacity"]) for t in targets()] == [(5, 12)]


def test_what_an_interrupted_run_left_is_reused(cli: Any) -> None:
    boto3.client("sagemaker").create_model(
        ModelName="manga-chat-v6-primary", ExecutionRoleArn=wf.ROLE, PrimaryContainer={"Image": "left-over"}
    )

    shown = create(cli, "manga-chat", "--json")

    assert shown.code == ExitCode.OK, shown.err
    assert shown.json()["created"][0] == "endpoint config manga-chat-v6-config"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "endpoint 'nope' is not in fleet.yaml"),
        # manga-chat-prod names no initial_model: every missing flag is named at once.
        (
            ["manga-chat-prod"],
            "--image-uri: not given and not in fleet.yaml (endpoints[manga-chat-prod].initial_model.image_uri); "
            "--model-version: not given and not in fleet.yaml (endpoints[manga-chat-prod].initial_model.version); "
            "--execution-role-arn: not given",
        ),
        (["manga-chat", "--execution-role-arn", "manga-role"], "--execution-role-arn: String should match pattern"),
        (["manga-chat", "--image-uri", "docker.io/vllm/vllm-openai:v0.32.0"], "SageMaker pulls from ECR only"),
        (["manga-chat", "--model-data-url", "https://example.com/m.tar.gz"], "--model-data-url: String should match"),
        (["manga-chat", "--model-version", "v6" * 30], "not a SageMaker name"),
    ],
)
def test_bad_input_is_refused_with_exit_2_before_any_aws_call(cli: Any, args: list[str], message: str) -> None:
    shown = create(cli, *args)

    assert shown.code == ExitCode.USAGE
    assert message in shown.err, shown.err
    assert "next: " in shown.err
    assert nothing_created()


def test_an_instance_type_sagemaker_does_not_host_is_refused(cli: Any, tmp_path: Any) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        wf.FLEET.read_text().replace("floor: 2, cap: 12}", "floor: 2, cap: 12, instance_type: g5.2xlarge}", 1)
    )

    shown = cli("--fleet", str(fleet), "--json", "endpoint", "create", "manga-chat")

    assert shown.code == ExitCode.USAGE
    assert "variant primary: instance type 'g5.2xlarge' is not a SageMaker hosting instance type" in shown.err
    assert nothing_created()
