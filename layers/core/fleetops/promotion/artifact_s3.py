"""Stream a candidate's artifact from S3 through the artifact gate (the S3 adapter): no scratch disk.

The artifact is a ``model.tar.gz`` (as SageMaker's ``ModelDataUrl`` names it) or a prefix ending in ``/``
whose objects are the files. Either is read once, as a stream: every file is hashed as it passes and only
what the decisions read is kept (:func:`fleetops.promotion.artifact_files.file_facts`), so an artifact of any
size fits a Lambda function's memory and needs none of its disk. A tarball member outside the folder (an
absolute path, ``..``) or a device file is refused before anything is judged; links are listed, never
followed, and the gate refuses them.
"""

from __future__ import annotations

import tarfile
from pathlib import PurePosixPath
from typing import IO, TYPE_CHECKING

from fleetops.promotion.artifact import ArtifactCheck, check_artifact
from fleetops.promotion.artifact_adapters import DEFAULT_MAX_LORA_RANK
from fleetops.promotion.artifact_files import CHUNK_BYTES, file_facts, read_chunks
from fleetops.promotion.artifact_snapshot import FileFacts, Snapshot

if TYPE_CHECKING:
    from botocore.response import StreamingBody
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


def _relative(key: str, prefix: str) -> str:
    relative = PurePosixPath(key.removeprefix(prefix))
    # A key may hold "..": S3 keys are names, not paths, and the gate must judge files inside the artifact only.
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ArtifactFetchError(f"s3 key {key!r} does not name a file inside the artifact")
    return relative.as_posix()


def _prefix_snapshot(s3: S3Client, bucket: str, prefix: str) -> Snapshot:
    files: dict[str, FileFacts] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if item["Key"].endswith("/"):  # a console-made "folder" marker, not a file
                continue
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"]
            path = _relative(item["Key"], prefix)
            files[path] = file_facts(path, item["Size"], body.iter_chunks(CHUNK_BYTES))
    return Snapshot(files=files)


def _tarball_snapshot(s3: S3Client, bucket: str, key: str) -> Snapshot:
    return read_tarball(s3.get_object(Bucket=bucket, Key=key)["Body"], f"s3://{bucket}/{key}")


def read_tarball(body: IO[bytes] | StreamingBody, where: str) -> Snapshot:
    """What the gate knows of the ``model.tar.gz`` streamed from ``body`` (``where`` names it in errors).

    Also how ``fleetctl model package`` checks the tarball it wrote, so a local check reads what SageMaker will.
    """
    files: dict[str, FileFacts] = {}
    links: list[str] = []
    try:
        with tarfile.open(fileobj=body, mode="r|*") as tar:  # stream mode: one pass, in order
            for member in tar:
                path = PurePosixPath(member.name.removeprefix("./"))
                if path.is_absolute() or ".." in path.parts:
                    raise ArtifactFetchError(f"member {member.name!r} is outside the artifact folder")
                if member.isdir():
                    continue
                if member.issym() or member.islnk():
                    links.append(path.as_posix())
                elif not member.isfile():
                    raise ArtifactFetchError(f"member {member.name!r} is a device or fifo, not a file")
                else:
                    stream = tar.extractfile(member)
                    assert stream is not None  # a regular file always has one
                    files[path.as_posix()] = file_facts(path.as_posix(), member.size, read_chunks(stream))
    except (tarfile.TarError, OSError, EOFError, ArtifactFetchError) as exc:
        raise ArtifactFetchError(f"{where}: cannot be unpacked safely: {exc}") from exc
    return Snapshot(files=files, links=tuple(sorted(links)))


def read_s3_snapshot(s3: S3Client, url: str) -> Snapshot:
    """What the gate knows of the artifact at ``url`` (a ``*.tar.gz`` object or a prefix ending in ``/``)."""
    bucket, key = split_s3_url(url)
    if key.endswith("/"):
        return _prefix_snapshot(s3, bucket, key)
    if key.endswith((".tar.gz", ".tgz")):
        return _tarball_snapshot(s3, bucket, key)
    raise ArtifactFetchError(f"{url}: neither a model.tar.gz nor a prefix ending in /")


def check_s3_artifact(
    s3: S3Client, url: str, *, max_lora_rank: int = DEFAULT_MAX_LORA_RANK, base_model: str | None = None
) -> ArtifactCheck:
    """Stream the artifact at ``url`` through the gate (see :func:`fleetops.promotion.artifact.check_artifact`)."""
    return check_artifact(read_s3_snapshot(s3, url), max_lora_rank=max_lora_rank, base_model=base_model)
