"""``fleetctl model package``: a model folder as SageMaker's model.tar.gz, judged by the rollout's own artifact gate,
its digests in a rollout request, uploaded to S3 on the emulator (moto over HTTP)."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import boto3
import pytest

from devtools.tiny_model import TinyModel, ensure_tiny_model
from fleetctl.errors import ExitCode
from fleetops.promotion.artifact_files import check_folder
from fleetops.promotion.artifact_gate import gate_artifact
from fleetops.promotion.artifact_s3 import check_s3_artifact
from fleetops.rollout.request_schema import parse_request
from tests.integration.fleetctl.conftest import check_schema

REPO = Path(__file__).resolve().parents[3]
BUCKET = "manga-llm-artifacts"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm:v7"


@pytest.fixture(scope="module")
def tiny() -> TinyModel:
    return ensure_tiny_model(REPO / ".cache" / "tiny-model")


@pytest.fixture
def model_dir(tiny: TinyModel, tmp_path: Path) -> Path:
    """The base model at the root; two adapters in versioned folders, one in a folder of its own name."""
    folder = tmp_path / "manga-llama-v7"
    shutil.copytree(tiny.model_dir, folder)
    shutil.copytree(tiny.adapters["jp_style"], folder / "adapters" / "jp_style" / "v2")
    shutil.copytree(tiny.adapters["manga_domain"], folder / "adapters" / "manga_domain" / "v3")
    shutil.copytree(tiny.adapters["general_support"], folder / "adapters" / "general_support")
    return folder


def package(cli: Any, folder: Path, tmp_path: Path, *args: str) -> Any:
    return cli(
        "--json",
        "model",
        "package",
        str(folder),
        "--output",
        str(tmp_path / "model.tar.gz"),
        "--request",
        str(tmp_path / "rollout.json"),
        "--model-version",
        "v7",
        *args,
    )


def test_the_packaged_artifact_passes_the_rollouts_gate_with_the_digests_it_printed(
    cli: Any, model_dir: Path, tmp_path: Path
) -> None:
    boto3.client("s3").create_bucket(Bucket=BUCKET)

    shown = package(cli, model_dir, tmp_path, "--upload", f"s3://{BUCKET}/models/manga-llama/v7", "--image-uri", IMAGE)

    assert shown.code == ExitCode.OK, shown.err
    report = shown.json()
    check_schema(report, "model_package")
    # The digests are the gate's, over the folder's files.
    folder = check_folder(model_dir)
    assert report["base_sha256"] == folder.base.digest
    assert {a["path"]: a["sha256"] for a in report["adapters"]} == {k: v.digest for k, v in folder.adapters.items()}
    assert [(a["name"], a["version"]) for a in report["adapters"]] == [
        ("general_support", "v1"),
        ("jp_style", "v2"),
        ("manga_domain", "v3"),
    ]
    # SageMaker's layout: the files at the tarball's root, unpacked as they are into /opt/ml/model.
    with tarfile.open(tmp_path / "model.tar.gz") as tar:
        names = tar.getnames()
    assert "config.json" in names and "adapters/jp_style/v2/adapter_config.json" in names
    assert not any(n.startswith(("/", "./")) for n in names)
    # The request it wrote is valid and names the uploaded artifact, which the rollout's gate passes.
    url = f"s3://{BUCKET}/models/manga-llama/v7/model.tar.gz"
    request = parse_request(json.loads((tmp_path / "rollout.json").read_text()))
    assert (report["model_data_url"], request.model.model_data_url, request.model.image_uri) == (url, url, IMAGE)
    assert report["fill_in"] == []
    result = gate_artifact(check_s3_artifact(boto3.client("s3"), url), request.model.release(), url)
    assert result.base_sha256 == report["base_sha256"] and set(result.adapters) == {
        "general_support",
        "jp_style",
        "manga_domain",
    }


def test_without_upload_the_request_names_what_is_left_to_fill_in(cli: Any, model_dir: Path, tmp_path: Path) -> None:
    shown = package(cli, model_dir, tmp_path)

    assert shown.code == ExitCode.OK, shown.err
    assert shown.json()["fill_in"] == ["model.image_uri", "model.model_data_url"]
    assert boto3.client("s3").list_buckets()["Buckets"] == []


def test_a_broken_folder_is_refused_naming_each_problem_and_nothing_is_kept(
    cli: Any, model_dir: Path, tmp_path: Path
) -> None:
    (model_dir / "tokenizer.json").unlink()
    (model_dir / "adapters" / "jp_style" / "v2" / "adapter_model.bin").write_bytes(b"\x80\x04")
    (model_dir / "extra.safetensors").symlink_to("/etc/passwd")

    shown = package(cli, model_dir, tmp_path, "--upload", f"s3://{BUCKET}/models/manga-llama/v7")

    assert shown.code == ExitCode.USAGE
    error = json.loads(shown.err.strip().splitlines()[-1])
    assert error["exit_code"] == 2 and error["error"].startswith(f"{model_dir} refused: ")
    assert "tokenizer.json: missing" in error["error"]
    assert "adapters/jp_style/v2/adapter_model.bin: .bin files are refused" in error["error"]
    assert "extra.safetensors: a link, not a regular file" in error["error"]
    assert "nothing kept or uploaded" in error["hint"]
    assert not (tmp_path / "model.tar.gz").exists() and not (tmp_path / "rollout.json").exists()


def test_not_a_folder_or_not_an_s3_prefix_is_refused_before_anything_is_written(cli: Any, tmp_path: Path) -> None:
    missing = package(cli, tmp_path / "nope", tmp_path)
    assert missing.code == ExitCode.USAGE and "is not a folder" in missing.err

    tmp_path.joinpath("m").mkdir()
    bad = package(cli, tmp_path / "m", tmp_path, "--upload", "models/manga-llama/v7")
    assert (
        bad.code == ExitCode.USAGE
        and "--upload: 'models/manga-llama/v7/model.tar.gz' is not an s3://bucket/key URL" in bad.err
    )
    assert not (tmp_path / "model.tar.gz").exists()
