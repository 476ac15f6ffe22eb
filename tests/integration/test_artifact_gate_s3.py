"""The artifact gate on S3 (the emulator): a model.tar.gz or a prefix is streamed, judged, and its checksums kept."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from devtools.local_sagemaker import package_model
from devtools.tiny_model import ensure_tiny_model
from fleetops.promotion.artifact_files import check_folder
from fleetops.promotion.artifact_s3 import ArtifactFetchError, check_s3_artifact

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

REPO = Path(__file__).resolve().parents[2]
BUCKET = "models"


@pytest.fixture
def s3() -> S3Client:
    client: S3Client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


def _tarball(tmp_path: Path) -> Path:
    return package_model(ensure_tiny_model(REPO / ".cache" / "tiny-model"), tmp_path / "model.tar.gz")


def test_a_good_model_tarball_passes_with_the_checksums_of_its_files(s3: S3Client, tmp_path: Path) -> None:
    s3.upload_file(str(_tarball(tmp_path)), BUCKET, "manga-llama/v7/model.tar.gz")
    local = tmp_path / "local"
    with tarfile.open(tmp_path / "model.tar.gz") as tar:
        tar.extractall(local, filter="data")

    check = check_s3_artifact(s3, f"s3://{BUCKET}/manga-llama/v7/model.tar.gz")

    assert check.ok, check.problems
    assert check == check_folder(local)
    assert sorted(check.adapters) == ["adapters/general_support", "adapters/jp_style", "adapters/manga_domain"]


def test_a_prefix_is_fetched_file_by_file_and_a_pickle_in_it_is_refused(s3: S3Client, tmp_path: Path) -> None:
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    for path in tiny.model_dir.iterdir():
        s3.upload_file(str(path), BUCKET, f"manga-llama/v8/{path.name}")
    s3.put_object(Bucket=BUCKET, Key="manga-llama/v8/adapters/jp_style/adapter_model.bin", Body=b"\x80\x04")

    check = check_s3_artifact(s3, f"s3://{BUCKET}/manga-llama/v8/")

    assert not check.ok
    assert any(p.startswith("adapters/jp_style/adapter_model.bin: .bin files are refused") for p in check.problems)
    assert check.base.files["config.json"] == check_folder(tiny.model_dir).base.files["config.json"]


def test_a_tarball_member_outside_the_folder_is_refused(s3: S3Client) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        member = tarfile.TarInfo("../escaped.json")
        member.size = 2
        tar.addfile(member, io.BytesIO(b"{}"))
    s3.put_object(Bucket=BUCKET, Key="evil/model.tar.gz", Body=buffer.getvalue())

    with pytest.raises(ArtifactFetchError, match=r"cannot be unpacked safely: member '\.\./escaped\.json' is outside"):
        check_s3_artifact(s3, f"s3://{BUCKET}/evil/model.tar.gz")


def test_a_url_that_is_neither_a_tarball_nor_a_prefix_is_refused(s3: S3Client) -> None:
    with pytest.raises(ArtifactFetchError, match=r"neither a model\.tar\.gz nor a prefix"):
        check_s3_artifact(s3, f"s3://{BUCKET}/manga-llama/v7/model.zip")


def test_a_link_in_a_tarball_is_listed_and_refused_never_followed(s3: S3Client, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(_tarball(tmp_path)) as good, tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member in good:
            tar.addfile(member, good.extractfile(member) if member.isfile() else None)
        link = tarfile.TarInfo("adapters/jp_style/adapter_model.safetensors.link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    s3.put_object(Bucket=BUCKET, Key="linked/model.tar.gz", Body=buffer.getvalue())

    check = check_s3_artifact(s3, f"s3://{BUCKET}/linked/model.tar.gz")

    assert check.problems == (
        "adapters/jp_style/adapter_model.safetensors.link: a link, not a regular file (an artifact holds files only)",
    )
