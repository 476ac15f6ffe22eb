"""The artifact gate on S3 (the emulator): a model.tar.gz or a prefix is streamed, judged, and its checksums kept;
the rollout's gate pins the object version it judged under verified/ (what the models deploy)."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from devtools.local_sagemaker import package_model
from devtools.local_system import packed_checksums
from devtools.tiny_model import ensure_tiny_model
from fleetops.promotion.artifact_files import check_folder
from fleetops.promotion.artifact_gate import ArtifactRefusedError
from fleetops.promotion.artifact_pin import VERIFIED_PREFIX, gate_s3_artifact, pin_tarball, verified_key
from fleetops.promotion.artifact_s3 import (
    ArtifactFetchError,
    S3Tarball,
    Tarball,
    check_s3_artifact,
    read_s3_snapshot,
    read_s3_tarball,
)
from fleetops.promotion.artifact_snapshot import Snapshot, SnapshotLimits
from fleetops.rollout.versions import Release

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


# ---------------------------------------------------------------- the rollout's gate: caps, and the pinned copy

SOURCE = "models/manga-llama/v7/model.tar.gz"
SOURCE_URL = f"s3://{BUCKET}/{SOURCE}"


@pytest.fixture
def versioned(s3: S3Client) -> S3Client:
    """The bucket as template.yaml's ModelArtifactBucket: it keeps every version of an object."""
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    return s3


def _release(archive: Path, **changes: str) -> Release:
    return Release(model="manga-llama", version="v7", sha256=packed_checksums(archive)[""]).model_copy(update=changes)


def _pinned(s3: S3Client) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=VERIFIED_PREFIX).get("Contents", [])]


def test_a_passed_tarball_is_pinned_under_its_sha256_and_a_later_swap_of_its_key_changes_nothing(
    versioned: S3Client, tmp_path: Path
) -> None:
    archive = _tarball(tmp_path)
    checked = archive.read_bytes()
    version = versioned.put_object(Bucket=BUCKET, Key=SOURCE, Body=checked)["VersionId"]

    result = gate_s3_artifact(versioned, SOURCE_URL, _release(archive))

    digest = hashlib.sha256(checked).hexdigest()
    assert result.pinned_url == f"s3://{BUCKET}/verified/sha256/{digest}/model.tar.gz"
    assert (result.model_data_url, result.artifact_sha256, result.source_version_id) == (SOURCE_URL, digest, version)
    # Someone with write access to models/ swaps the key the request named, after the gate passed it.
    versioned.put_object(Bucket=BUCKET, Key=SOURCE, Body=b"not the weights the gate checked")
    pinned = versioned.get_object(Bucket=BUCKET, Key=verified_key(digest))
    assert pinned["Body"].read() == checked
    assert pinned["Metadata"] == {"source": SOURCE_URL, "source-version-id": version}


def test_a_swap_between_the_read_and_the_copy_does_not_reach_the_pinned_copy(
    versioned: S3Client, tmp_path: Path
) -> None:
    archive = _tarball(tmp_path)
    versioned.upload_file(str(archive), BUCKET, SOURCE)
    read = read_s3_tarball(versioned, SOURCE_URL, versioned=True)  # hashed: the gate has judged this version
    versioned.put_object(Bucket=BUCKET, Key=SOURCE, Body=b"swapped while the gate judged")

    url = pin_tarball(versioned, read)

    copied = versioned.get_object(Bucket=BUCKET, Key=url.removeprefix(f"s3://{BUCKET}/"))["Body"].read()
    assert copied == archive.read_bytes() and hashlib.sha256(copied).hexdigest() == read.tarball.sha256


def test_a_copy_above_the_multipart_threshold_is_of_the_version_read_too(versioned: S3Client) -> None:
    first = os.urandom(9 * 2**20)  # above boto3's 8 MB threshold: UploadPartCopy, each part naming the version
    version = versioned.put_object(Bucket=BUCKET, Key=SOURCE, Body=first)["VersionId"]
    versioned.put_object(Bucket=BUCKET, Key=SOURCE, Body=os.urandom(9 * 2**20))
    digest = hashlib.sha256(first).hexdigest()
    read = S3Tarball(BUCKET, SOURCE, version, Tarball(Snapshot(files={}), sha256=digest, size=len(first)))

    url = pin_tarball(versioned, read)

    assert versioned.get_object(Bucket=BUCKET, Key=verified_key(digest))["Body"].read() == first
    assert url == f"s3://{BUCKET}/{verified_key(digest)}"


def test_a_refused_artifact_is_not_pinned(versioned: S3Client, tmp_path: Path) -> None:
    archive = _tarball(tmp_path)
    versioned.upload_file(str(archive), BUCKET, SOURCE)

    with pytest.raises(
        ArtifactRefusedError, match=r"base model: the artifact's sha256 is .* not the artifact requested"
    ):
        gate_s3_artifact(versioned, SOURCE_URL, _release(archive, sha256="f" * 64))

    assert _pinned(versioned) == []


def test_without_versioning_the_gate_refuses_before_reading_naming_the_bucket_setting(
    s3: S3Client, tmp_path: Path
) -> None:
    archive = _tarball(tmp_path)
    s3.upload_file(str(archive), BUCKET, SOURCE)

    with pytest.raises(ArtifactFetchError, match=r"has no version id \(the bucket's versioning is off or suspended\)"):
        gate_s3_artifact(s3, SOURCE_URL, _release(archive))

    assert _pinned(s3) == []


def test_the_rollouts_gate_deploys_one_tarball_not_a_prefix(versioned: S3Client) -> None:
    with pytest.raises(ArtifactFetchError, match=r"a rollout deploys one model\.tar\.gz .*fleetctl model package"):
        gate_s3_artifact(versioned, f"s3://{BUCKET}/models/manga-llama/v8/", Release(model="m", version="v8"))


def test_a_gzip_bomb_in_the_bucket_is_refused_at_its_header_and_nothing_is_pinned(versioned: S3Client) -> None:
    info = tarfile.TarInfo("model.safetensors")
    info.size = 100 * 2**30  # 100 GiB of zeros; this object holds the first GiB of it, a megabyte compressed
    body = gzip.compress(info.tobuf()) + gzip.compress(bytes(2**20), compresslevel=9) * 1024
    versioned.put_object(Bucket=BUCKET, Key=SOURCE, Body=body)
    started = time.monotonic()

    with pytest.raises(ArtifactFetchError, match="above the gate's cap of 64 GiB per artifact"):
        gate_s3_artifact(versioned, SOURCE_URL, Release(model="manga-llama", version="v7"))

    assert time.monotonic() - started < 5
    assert _pinned(versioned) == []


def test_an_object_larger_than_the_cap_is_refused_before_it_is_read(s3: S3Client) -> None:
    s3.put_object(Bucket=BUCKET, Key=SOURCE, Body=bytes(2048))

    with pytest.raises(ArtifactFetchError, match="2048 bytes compressed: above the gate's cap of 1 KiB per artifact"):
        read_s3_tarball(s3, SOURCE_URL, SnapshotLimits(max_bytes=1024))


def test_a_prefix_with_more_files_than_the_cap_is_refused_before_the_rest_is_read(s3: S3Client) -> None:
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        s3.put_object(Bucket=BUCKET, Key=f"manga-llama/v8/{name}", Body=b"{}")

    with pytest.raises(ArtifactFetchError, match=r"more than 2 entries .* above the gate's cap of 2 per artifact"):
        read_s3_snapshot(s3, f"s3://{BUCKET}/manga-llama/v8/", SnapshotLimits(max_files=2))
