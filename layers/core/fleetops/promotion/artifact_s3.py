"""Stream a candidate's artifact from S3 through the artifact gate (the S3 adapter): no scratch disk.

The artifact is a ``model.tar.gz`` (as SageMaker's ``ModelDataUrl`` names it) or a prefix ending in ``/``
whose objects are the files. Either is read once, as a stream: every file is hashed as it passes and only
what the decisions read is kept (:func:`fleetops.promotion.artifact_files.file_facts`), so an artifact of any
size fits a Lambda function's memory and needs none of its disk. A tarball member outside the folder (an
absolute path, ``..``), a device file or a sparse file is refused before anything is judged; links are listed,
never followed, and the gate refuses them. Every entry is admitted by its declared size before it is read
(:class:`fleetops.promotion.artifact_snapshot.Tally`: caps on entries, bytes and JSON read), and the gunzip
under the tar reader hands out no byte past the member it admitted and the next header's allowance
(:mod:`fleetops.promotion.artifact_stream`), so a tarball past a cap or a gzip bomb is refused early.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO, TYPE_CHECKING

from fleetops.promotion.artifact import ArtifactCheck, check_artifact
from fleetops.promotion.artifact_adapters import DEFAULT_MAX_LORA_RANK
from fleetops.promotion.artifact_files import CHUNK_BYTES, file_facts, read_chunks
from fleetops.promotion.artifact_snapshot import (
    ArtifactLimitError,
    FileFacts,
    Snapshot,
    SnapshotLimits,
    Tally,
    size_text,
)
from fleetops.promotion.artifact_stream import HEADER_BYTES, BoundedGunzip, GzipError, HashingReader

if TYPE_CHECKING:
    from botocore.response import StreamingBody
    from mypy_boto3_s3 import S3Client


class ArtifactFetchError(Exception):
    """The artifact cannot be fetched or unpacked safely; the message says which object and why."""


#: Why the gunzip stops: what lies past a member's data and the next header's allowance is not a tar header.
_HEADER_CAP = (
    f"a member's headers (a pax or long-name header) run past the gate's cap of {size_text(HEADER_BYTES)} "
    "per member (a gzip bomb?)"
)


@dataclass(frozen=True)
class Tarball:
    """A ``model.tar.gz`` as the gate read it: what it holds, and the sha256 and size of its own bytes."""

    snapshot: Snapshot
    sha256: str
    size: int


@dataclass(frozen=True)
class S3Tarball:
    """A tarball read from S3, and the object version the gate read (``None``: the bucket keeps no versions)."""

    bucket: str
    key: str
    version_id: str | None
    tarball: Tarball


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


def _prefix_snapshot(s3: S3Client, bucket: str, prefix: str, limits: SnapshotLimits) -> Snapshot:
    files: dict[str, FileFacts] = {}
    tally = Tally(limits)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if item["Key"].endswith("/"):  # a console-made "folder" marker, not a file
                continue
            path = _relative(item["Key"], prefix)
            try:
                tally.admit(path, item["Size"])
            except ArtifactLimitError as exc:
                raise ArtifactFetchError(f"s3://{bucket}/{prefix}: refused before reading the rest: {exc}") from exc
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"]
            files[path] = file_facts(path, item["Size"], body.iter_chunks(CHUNK_BYTES))
    return Snapshot(files=files)


def read_s3_tarball(
    s3: S3Client, url: str, limits: SnapshotLimits | None = None, *, versioned: bool = False
) -> S3Tarball:
    """Stream the ``model.tar.gz`` at ``url`` once: what it holds, its bytes' sha256 and the version read.

    ``versioned``: refuse, before reading, an object that has no version id to pin (versioning off or suspended).
    """
    bucket, key = split_s3_url(url)
    limits = limits or SnapshotLimits()
    got = s3.get_object(Bucket=bucket, Key=key)
    if versioned and got.get("VersionId") in (None, "", "null"):
        got["Body"].close()
        raise ArtifactFetchError(
            f"{url}: the object has no version id (the bucket's versioning is off or suspended): the gate pins the "
            "version it checked, so the artifact bucket must keep versions (template.yaml's ModelArtifactBucket does)"
        )
    if got["ContentLength"] > limits.max_bytes:  # gzip never makes a tarball larger than its files by much
        raise ArtifactFetchError(
            f"{url}: {got['ContentLength']} bytes compressed: above the gate's cap of {size_text(limits.max_bytes)} "
            "per artifact"
        )
    tarball = unpack_tarball(got["Body"], url, limits)
    return S3Tarball(bucket=bucket, key=key, version_id=got.get("VersionId"), tarball=tarball)


def read_tarball(body: IO[bytes] | StreamingBody, where: str, limits: SnapshotLimits | None = None) -> Snapshot:
    """What the gate knows of the ``model.tar.gz`` streamed from ``body`` (``where`` names it in errors).

    Also how ``fleetctl model package`` checks the tarball it wrote, so a local check reads what SageMaker will.
    """
    return unpack_tarball(body, where, limits).snapshot


def unpack_tarball(body: IO[bytes] | StreamingBody, where: str, limits: SnapshotLimits | None = None) -> Tarball:
    """:func:`read_tarball`, with the sha256 and size of the bytes read (the whole stream, to its end).

    Raises
    ------
    ArtifactFetchError
        Not a gzip tar, a member outside the folder or not a file, link or folder, or past a cap of ``limits``
        (the message names the cap); nothing past the refused entry is unpacked.
    """
    files: dict[str, FileFacts] = {}
    links: list[str] = []
    tally = Tally(limits or SnapshotLimits())
    raw = HashingReader(body)
    stream = BoundedGunzip(raw, HEADER_BYTES, _HEADER_CAP)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:  # stream mode: one pass, in order
            for member in tar:
                stream.bound(tar.offset + HEADER_BYTES, _HEADER_CAP)  # its data, then the next member's headers
                path = PurePosixPath(member.name.removeprefix("./"))
                if path.is_absolute() or ".." in path.parts:
                    raise ArtifactFetchError(f"member {member.name!r} is outside the artifact folder")
                tally.admit(path.as_posix(), member.size)
                if member.isdir():
                    continue
                if member.issym() or member.islnk():
                    links.append(path.as_posix())
                elif member.issparse() or not member.isfile():
                    raise ArtifactFetchError(f"member {member.name!r} is a sparse, device or fifo file, not a file")
                else:
                    extracted = tar.extractfile(member)
                    assert extracted is not None  # a regular file always has one
                    files[path.as_posix()] = file_facts(path.as_posix(), member.size, read_chunks(extracted))
        raw.drain()
    except ArtifactLimitError as exc:
        raise ArtifactFetchError(f"{where}: refused before unpacking the rest: {exc}") from exc
    except (tarfile.TarError, OSError, EOFError, GzipError, ArtifactFetchError) as exc:
        raise ArtifactFetchError(f"{where}: cannot be unpacked safely: {exc}") from exc
    return Tarball(Snapshot(files=files, links=tuple(sorted(links))), sha256=raw.hexdigest(), size=raw.size)


def read_s3_snapshot(s3: S3Client, url: str, limits: SnapshotLimits | None = None) -> Snapshot:
    """What the gate knows of the artifact at ``url`` (a ``*.tar.gz`` object or a prefix ending in ``/``)."""
    bucket, key = split_s3_url(url)
    if key.endswith("/"):
        return _prefix_snapshot(s3, bucket, key, limits or SnapshotLimits())
    if key.endswith((".tar.gz", ".tgz")):
        return read_s3_tarball(s3, url, limits).tarball.snapshot
    raise ArtifactFetchError(f"{url}: neither a model.tar.gz nor a prefix ending in /")


def check_s3_artifact(
    s3: S3Client, url: str, *, max_lora_rank: int = DEFAULT_MAX_LORA_RANK, base_model: str | None = None
) -> ArtifactCheck:
    """Stream the artifact at ``url`` through the gate (see :func:`fleetops.promotion.artifact.check_artifact`)."""
    return check_artifact(read_s3_snapshot(s3, url), max_lora_rank=max_lora_rank, base_model=base_model)
