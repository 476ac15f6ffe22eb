"""What a rollout deploys is what its gates passed: the pinned artifact, and only what the endpoint allows.

Executed from the ASL files on the moto server (see ``conftest.py``). Here the stack's dev environment runs the
pre-traffic gates, as the shipped fleet.yaml does: the artifact gate streams the model.tar.gz from the emulated
(versioned) bucket, and both models the rollout creates must deploy the copy it pinned under ``verified/``,
so a swap of the key the request named, after the gate passed it, reaches no instance. (That no principal but the
gate may write ``verified/`` is the bucket policy's, which moto does not enforce:
tests/unit/test_verified_artifacts_policy.py.) The candidate gate then has no real engine to ask (moto's
endpoints answer no prompt), so the rollout rolls back before any user; the models it created remain.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from devtools import rollout_workflow as wf
from devtools.lambda_dispatch import cold_start_environment
from devtools.local_sagemaker import package_model
from devtools.local_system import packed_checksums
from devtools.tiny_model import ADAPTERS, ensure_tiny_model
from tests.integration.workflows.conftest import rollout_request

SOURCE = "models/manga-llama/v7/model.tar.gz"


@pytest.fixture
def gated_fleet(tmp_path: Path) -> Path:
    """The emulated stack's fleet.yaml with the dev environment's pre-traffic gates on, as shipped."""
    fleet = yaml.safe_load(wf.FLEET.read_text())
    fleet["rollout_policy"]["dev"]["pre_traffic_gates"] = True
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    return path


def _upload(tmp_path: Path) -> tuple[bytes, dict[str, Any]]:
    """The tiny model's model.tar.gz in the versioned artifact bucket; its bytes and the request's model."""
    archive = package_model(ensure_tiny_model(wf.REPO / ".cache" / "tiny-model"), tmp_path / "model.tar.gz")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=wf.ARTIFACT_BUCKET)
    s3.put_bucket_versioning(Bucket=wf.ARTIFACT_BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.upload_file(str(archive), wf.ARTIFACT_BUCKET, SOURCE)
    digests = packed_checksums(archive)
    model = rollout_request()["model"] | {
        "sha256": digests[""],
        "model_data_url": f"s3://{wf.ARTIFACT_BUCKET}/{SOURCE}",
        "adapters": {
            name: {"version": "v1", "path": f"adapters/{name}", "sha256": digests[f"adapters/{name}"]}
            for name in ADAPTERS
        },
    }
    return archive.read_bytes(), model


def _wait_for_state(execution: str, state: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while state not in wf.state_history(execution):
        assert time.monotonic() < deadline, (state, wf.state_history(execution))
        time.sleep(0.1)


def test_the_models_deploy_the_copy_the_gate_checked_and_a_swap_of_the_named_key_reaches_neither(
    rollout: wf.RolloutWorkflow, gated_fleet: Path, tmp_path: Path
) -> None:
    checked, model = _upload(tmp_path)
    s3 = boto3.client("s3")
    with cold_start_environment({"FLEET_CONFIG_PATH": str(gated_fleet)}, ["rollout_validate"]):
        execution = wf.start_rollout(rollout_request(model=model, steps=[100]))
        _wait_for_state(execution, "PinArtifact")
        # Someone who may write models/ swaps the key the request named, right after the gate passed it.
        s3.put_object(Bucket=wf.ARTIFACT_BUCKET, Key=SOURCE, Body=b"weights nobody checked")
        result = wf.wait(execution, timeout_s=120)

    history = wf.state_history(execution)
    assert history.index("CheckArtifact") < history.index("CreateModel") < history.index("CreateFinalModel"), history
    # moto's canary answers no prompt: the candidate gate fails it and the rollout rolls back before any user.
    assert (result["status"], result["error"], history[-3]) == ("FAILED", "RolledBack", "CandidateFailed"), history
    pinned = f"s3://{wf.ARTIFACT_BUCKET}/verified/sha256/{hashlib.sha256(checked).hexdigest()}/model.tar.gz"
    sagemaker = boto3.client("sagemaker")
    for name in ("manga-chat-llama-q4-v7-model", "manga-chat-llama-q4-v7-final-model"):
        assert sagemaker.describe_model(ModelName=name)["PrimaryContainer"]["ModelDataUrl"] == pinned, result
    # What SageMaker downloads there, now and at every later instance launch, is what the gate hashed.
    body = s3.get_object(Bucket=wf.ARTIFACT_BUCKET, Key=pinned.removeprefix(f"s3://{wf.ARTIFACT_BUCKET}/"))["Body"]
    assert body.read() == checked


@pytest.mark.parametrize(
    ("changes", "problems"),
    [
        (
            {"endpoint_name": "manga-chat-prod", "approval_steps": [100]},
            [
                f"model.image_uri: '{wf.IMAGE_REPOSITORY}:v7' names a tag",
                f"a prod endpoint deploys images by digest: pass {wf.IMAGE_REPOSITORY}@sha256:<64 hex digits>",
            ],
        ),
        (
            {"canary": {"instance_type": "ml.p4d.24xlarge", "instance_count": 5}},
            [
                "canary.instance_type: 'ml.p4d.24xlarge' is not allowed on endpoint 'manga-chat'; allowed: "
                "['ml.g5.2xlarge'] (fleet.yaml: the endpoint's canary_limits.instance_types)",
                "canary.instance_count: 5 is above the max of 4 on endpoint 'manga-chat' (fleet.yaml: the "
                "endpoint's canary_limits.max_instance_count)",
            ],
        ),
    ],
)
def test_validate_refuses_a_tag_in_prod_and_a_canary_past_the_endpoints_limits_touching_nothing(
    rollout: wf.RolloutWorkflow, changes: dict[str, Any], problems: list[str]
) -> None:
    request = rollout_request(**changes)
    request["model"] = request["model"] | {"image_uri": f"{wf.IMAGE_REPOSITORY}:v7"}  # fine on the dev endpoint

    result = wf.wait(wf.start_rollout(request), timeout_s=30)

    assert (result["status"], result["error"]) == ("FAILED", "RolloutInputError"), result
    for problem in problems:  # what the operator reads in the execution's cause
        assert problem in result["cause"], result["cause"]
    assert wf.state_history(result["executionArn"]) == ["Validate", "Refused"]
    assert [m["ModelName"] for m in boto3.client("sagemaker").list_models()["Models"]] == ["manga-chat-v6-model"]
