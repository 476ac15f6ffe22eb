"""The rollout's artifact gate on S3: read the ``model.tar.gz`` once, judge it, and pin exactly what was judged.

SageMaker downloads a model's ``ModelDataUrl`` at deployment, at promotion and at every later instance launch
(a scale-out, a replaced instance). Were that the key the request named, anyone who may write the bucket could
swap the weights after the gate passed them. So the gate copies the object *version* it hashed (S3 keeps every
version: a later write makes a new one) to a key named by that hash, under :data:`VERIFIED_PREFIX`, which the
bucket policy lets no principal but the gate's role write (``template.yaml``, ``ModelArtifactBucketPolicy``);
the rollout's models deploy that copy. Every version of a verified key has the bytes its name says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetops.promotion.artifact import check_artifact
from fleetops.promotion.artifact_gate import ArtifactGateResult, gate_artifact
from fleetops.promotion.artifact_s3 import ArtifactFetchError, S3Tarball, read_s3_tarball
from fleetops.rollout.versions import Release

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: Where the gate's pinned copies live; only the gate's role may write under it (the bucket policy).
VERIFIED_PREFIX = "verified/"
_TARBALL_SUFFIXES = (".tar.gz", ".tgz")


def verified_key(sha256: str) -> str:
    """The key of the pinned copy of a ``model.tar.gz`` whose bytes have this sha256.

    Examples
    --------
    >>> verified_key("ab" * 32)  # doctest: +ELLIPSIS
    'verified/sha256/abab...abab/model.tar.gz'
    """
    return f"{VERIFIED_PREFIX}sha256/{sha256}/model.tar.gz"


def pin_tarball(s3: S3Client, read: S3Tarball) -> str:
    """Copy the object version the gate read to its verified key (server-side); the copy's ``s3://`` URL."""
    if not read.version_id:
        raise ArtifactFetchError(f"s3://{read.bucket}/{read.key}: no version id to pin the copy to")
    key = verified_key(read.tarball.sha256)
    s3.copy(
        CopySource={"Bucket": read.bucket, "Key": read.key, "VersionId": read.version_id},
        Bucket=read.bucket,
        Key=key,
        ExtraArgs={
            "MetadataDirective": "REPLACE",
            "Metadata": {"source": f"s3://{read.bucket}/{read.key}", "source-version-id": read.version_id},
        },
    )
    return f"s3://{read.bucket}/{key}"


def gate_s3_artifact(s3: S3Client, url: str, release: Release) -> ArtifactGateResult:
    """Read, judge and pin the rollout's ``model.tar.gz``: the result's ``pinned_url`` is what the models deploy.

    Raises
    ------
    ArtifactFetchError
        Not a ``model.tar.gz``, an object without a version id, or one that cannot be unpacked safely or is past
        one of the gate's caps; nothing is copied.
    ArtifactRefusedError
        The artifact fails the checks or is not the release requested (every problem listed); nothing is copied.
    """
    if not url.endswith(_TARBALL_SUFFIXES):
        raise ArtifactFetchError(
            f"{url}: a rollout deploys one model.tar.gz (SageMaker's ModelDataUrl), not a prefix or another file: "
            "pack the folder with `fleetctl model package`"
        )
    read = read_s3_tarball(s3, url, versioned=True)
    result = gate_artifact(check_artifact(read.tarball.snapshot), release, url)
    return result.model_copy(
        update={
            "pinned_url": pin_tarball(s3, read),
            "artifact_sha256": read.tarball.sha256,
            "source_version_id": read.version_id,
        }
    )
