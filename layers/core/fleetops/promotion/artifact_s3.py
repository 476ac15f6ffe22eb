"""Fetch a candidate's artifact from S3 into a scratch folder and run the artifact gate on it (the S3 adapter).

The artifact is a ``model.tar.gz`` (as SageMaker's ``ModelDataUrl`` names it) or a prefix ending in ``/``
whose objects are the files. A tarball is extracted with tarfile's ``data`` filter, which refuses members
outside the folder, absolute paths and device files; links inside it are extracted and then refused by the
gate, which never follows them.
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from fleetops.promotion.artifact import ArtifactCheck
from fleetops.promotion.artifact_adapters import DEFAULT_MAX_LORA_RANK
from fleetops.promotion.artifact_files import check_folder

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class ArtifactFetchError(Exception):
    """The artifact cannot be fetched or unpacked safely; the message says which object and why."""


def split_s3_url(url: str) -> tuple[str, str]:
    """Bucket and key (or prefix) of an ``s3://`` URL.

    Examples
    --------
    >>> split_s3_url("s3://models/manga-llama/v7/model.tar.gz")
    ('models', 'manga-llama/v7/model.tar.gz')
    >>> split_s3_url("https://models/x")
    Traceback (most recent call last):
    ...
    fleetops.promotion.artifact_s3.ArtifactFetchError: 'https://models/x' is not an s3://bucket/key URL
    """
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key:
        raise ArtifactFetchError(f"{url!r} is not an s3://bucket/key URL")
    return bucket, key


def _relative(key: str, prefix: str) -> PurePosixPath:
    relative = PurePosixPath(key.removeprefix(prefix))
    # A key may hold "..": S3 keys are names, not paths, and one could write outside the scratch folder.
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ArtifactFetchError(f"s3 key {key!r} does not name a file inside the artifact")
    return relative


def _fetch_prefix(s3: S3Client, bucket: str, prefix: str, dest: Path) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if item["Key"].endswith("/"):  # a console-made "folder" marker, not a file
                continue
            target = dest / _relative(item["Key"], prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, item["Key"], str(target))


def _fetch_tarball(s3: S3Client, bucket: str, key: str, dest: Path, scratch: Path) -> None:
    archive = scratch / "model.tar.gz"
    s3.download_file(bucket, key, str(archive))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise ArtifactFetchError(f"s3://{bucket}/{key}: cannot be unpacked safely: {exc}") from exc


def fetch_artifact(s3: S3Client, url: str, dest: Path) -> Path:
    """Put the artifact at ``url`` (a ``*.tar.gz`` object or a prefix ending in ``/``) into the empty ``dest``."""
    bucket, key = split_s3_url(url)
    dest.mkdir(parents=True, exist_ok=True)
    if key.endswith("/"):
        _fetch_prefix(s3, bucket, key, dest)
    elif key.endswith((".tar.gz", ".tgz")):
        with tempfile.TemporaryDirectory() as scratch:
            _fetch_tarball(s3, bucket, key, dest, Path(scratch))
    else:
        raise ArtifactFetchError(f"{url}: neither a model.tar.gz nor a prefix ending in /")
    return dest


def check_s3_artifact(
    s3: S3Client, url: str, *, max_lora_rank: int = DEFAULT_MAX_LORA_RANK, base_model: str | None = None
) -> ArtifactCheck:
    """Fetch the artifact into a scratch folder, judge it, and remove the folder."""
    with tempfile.TemporaryDirectory(prefix="artifact-gate-") as scratch:
        root = fetch_artifact(s3, url, Path(scratch) / "artifact")
        return check_folder(root, max_lora_rank=max_lora_rank, base_model=base_model)
