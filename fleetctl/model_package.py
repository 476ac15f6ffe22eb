"""``fleetctl model package DIR``: a ``model.tar.gz`` the rollout's artifact gate accepts, and its digests.

The tarball holds DIR's files at its root (SageMaker unpacks ``ModelDataUrl`` into ``/opt/ml/model``): the base
model there, each LoRA adapter in a folder of its own. It is then read back through the gate's own tarball reader
and judged by the gate itself (:func:`fleetops.promotion.artifact.check_artifact`), so what passes here passes the
rollout's gate. The digests it prints are the ones a rollout request names (``model.sha256``, each adapter's
``sha256``); the request it writes carries them.
"""

from __future__ import annotations

import gzip
import json
import re
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel

from fleetctl.errors import CliError, ExitCode

#: What the request names when nothing better is known; the report lists each field to fill in.
IMAGE_PLACEHOLDER = "ACCOUNT.dkr.ecr.REGION.amazonaws.com/manga-llm:TAG"
DATA_PLACEHOLDER = "s3://BUCKET/PREFIX/model.tar.gz"
#: The adapters' folder convention (``adapters/<name>/<version>``): the name and version a request gives them.
_ADAPTER_FOLDER = re.compile(r"^(?:.*/)?adapters/(?P<name>[A-Za-z0-9._-]+)(?:/(?P<version>[A-Za-z0-9._-]+))?$")


class AdapterDigest(BaseModel):
    name: str
    version: str
    path: str
    sha256: str


class PackageReport(BaseModel):
    ok: bool
    problems: list[str]
    tarball: str | None  # None: refused, nothing kept
    size_bytes: int
    files: int
    base_sha256: str
    adapters: list[AdapterDigest]
    model_data_url: str | None  # where --upload put it
    request: str | None  # the rollout request written
    fill_in: list[str]  # request fields still holding a placeholder


def write_tarball(source: Path, target: Path) -> int:
    """Pack ``source``'s entries at the tarball's root, sorted, with fixed owners and times; returns the size.

    Links are packed as links: the gate refuses them by name rather than this packing what they point at.
    """
    with (
        target.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(source.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(source).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isfile():
                with path.open("rb") as stream:
                    tar.addfile(info, stream)
            else:
                tar.addfile(info)
    return target.stat().st_size


def adapter_digests(found: dict[str, str], default_version: str) -> list[AdapterDigest]:
    """Each adapter folder's name, version and digest, as a request names them.

    Examples
    --------
    >>> [a.name + " " + a.version for a in adapter_digests({"adapters/jp/v2": "a" * 64, "adapters/m": "b" * 64}, "v1")]
    ['jp v2', 'm v1']
    """
    digests = []
    for folder, digest in sorted(found.items()):
        match = _ADAPTER_FOLDER.match(folder)
        name = match["name"] if match else PurePosixPath(folder).name
        version = (match["version"] if match else None) or default_version
        digests.append(AdapterDigest(name=name, version=version, path=folder, sha256=digest))
    return digests


def rollout_request(
    endpoint_name: str,
    model: dict[str, str],
    base_sha256: str,
    adapters: list[AdapterDigest],
    data_url: str,
    instance_type: str,
) -> dict[str, Any]:
    """The request skeleton with the digests filled in (a person fills in the placeholders and the steps)."""
    rollout_id = re.sub(r"[^a-zA-Z0-9]+", "-", f"{model['name']}-{model['version']}").strip("-")[:40].strip("-")
    spec: dict[str, Any] = {
        "name": model["name"],
        "version": model["version"],
        "sha256": base_sha256,
        "image_uri": model.get("image_uri") or IMAGE_PLACEHOLDER,
        "model_data_url": data_url,
    }
    if adapters:
        spec["adapters"] = {a.name: {"version": a.version, "path": a.path, "sha256": a.sha256} for a in adapters}
    return {
        "rollout_id": rollout_id,
        "endpoint_name": endpoint_name,
        "model": spec,
        "canary": {"instance_type": instance_type, "instance_count": 1},
    }


def upload_url(prefix: str) -> str:
    """Where ``--upload PREFIX`` puts the tarball: ``PREFIX/model.tar.gz``.

    Examples
    --------
    >>> upload_url("s3://models/manga-llama/v7/")
    's3://models/manga-llama/v7/model.tar.gz'
    """
    from fleetops.promotion.artifact_s3 import ArtifactFetchError, split_s3_url

    url = prefix.rstrip("/") + "/model.tar.gz"
    try:
        split_s3_url(url)
    except ArtifactFetchError as exc:
        raise CliError(ExitCode.USAGE, f"--upload: {exc}", "give s3://BUCKET/PREFIX") from None
    return url


def package(
    source: Path,
    output: Path,
    request_path: Path,
    *,
    endpoint_name: str,
    model: dict[str, str],
    adapter_version: str,
    instance_type: str,
    upload: str | None,
) -> PackageReport:
    """Pack, check, and (when it passes) upload and write the request; a refused tarball is deleted.

    Raises
    ------
    CliError
        ``USAGE`` when ``source`` is not a folder or ``--upload`` is not an S3 prefix (before anything is written),
        or when the tarball cannot be read back safely (a device file in the folder).
    """
    from fleetctl import awsclients
    from fleetops.promotion.artifact import check_artifact
    from fleetops.promotion.artifact_s3 import ArtifactFetchError, read_tarball, split_s3_url
    from fleetops.rollout.request_schema import RolloutInputError, parse_request

    if not source.is_dir():
        raise CliError(ExitCode.USAGE, f"{source} is not a folder", "give the folder holding config.json and weights")
    url = upload_url(upload) if upload else None
    size = write_tarball(source, output)
    try:
        with output.open("rb") as stream:
            check = check_artifact(read_tarball(stream, str(output)))
    except ArtifactFetchError as exc:
        output.unlink()
        raise CliError(ExitCode.USAGE, str(exc), "package a folder of regular files") from None
    adapters = adapter_digests({folder: c.digest for folder, c in check.adapters.items()}, adapter_version)
    report = PackageReport(
        ok=False,
        problems=list(check.problems),
        tarball=None,
        size_bytes=size,
        files=len(check.base.files) + sum(len(a.files) for a in check.adapters.values()),
        base_sha256=check.base.digest,
        adapters=adapters,
        model_data_url=None,
        request=None,
        fill_in=[],
    )
    if check.problems:
        output.unlink()  # nobody uploads a refused artifact by hand
        return report
    request = rollout_request(endpoint_name, model, check.base.digest, adapters, url or DATA_PLACEHOLDER, instance_type)
    try:
        parse_request(request)
    except RolloutInputError as exc:  # e.g. a version too long for SageMaker's names: fix the flags, pack again
        return report.model_copy(update={"problems": [str(exc)], "tarball": str(output)})
    if url:
        bucket, key = split_s3_url(url)
        awsclients.client("s3").upload_file(str(output), bucket, key)
    request_path.write_text(json.dumps(request, indent=2) + "\n", encoding="utf-8")
    placeholders = {"model.image_uri": IMAGE_PLACEHOLDER, "model.model_data_url": DATA_PLACEHOLDER}
    fill_in = [field for field, value in placeholders.items() if value in request["model"].values()]
    return report.model_copy(
        update={
            "ok": True,
            "tarball": str(output),
            "model_data_url": url,
            "request": str(request_path),
            "fill_in": fill_in,
        }
    )
