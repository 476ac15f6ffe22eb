"""The rollout's artifact gate: the candidate's artifact passes the checks and is the release the request names.

:func:`fleetops.promotion.artifact.check_artifact` judges the files; this compares what it measured with the
checksums the rollout request carries (and the pointer and registry will record), so a request cannot name
one artifact and deploy another, and an adapter folder the request names must be in the artifact.
"""

from __future__ import annotations

from pydantic import Field

from fleetops.promotion.artifact import ArtifactCheck
from fleetops.rollout.versions import Release
from fleetops.validation import StrictModel


class ArtifactRefusedError(Exception):
    """The candidate's artifact failed the gate; the message lists every problem, each naming its file."""


class ArtifactGateResult(StrictModel):
    """What the gate checked and found, kept in the rollout's output."""

    model_data_url: str = Field(description="the artifact the request named, as read and checked")
    base_sha256: str
    adapters: dict[str, str] = Field(description="adapter name -> the sha256 checked")
    files: int
    tokenizer_check: str
    pinned_url: str | None = Field(
        default=None,
        description="the copy of exactly the bytes checked, under verified/ (fleetops.promotion.artifact_pin): "
        "the ModelDataUrl the rollout's models deploy",
    )
    artifact_sha256: str | None = Field(default=None, description="sha256 of the model.tar.gz's bytes as read")
    source_version_id: str | None = Field(default=None, description="the S3 object version read and copied")


def release_problems(check: ArtifactCheck, release: Release) -> list[str]:
    """The check's problems plus every checksum or adapter folder that differs from the request.

    Examples
    --------
    >>> from fleetops.promotion.artifact import checksums
    >>> check = ArtifactCheck(ok=True, problems=(), base=checksums({"config.json": "1" * 64}), adapters={},
    ...                       max_lora_rank=64)
    >>> print(release_problems(check, Release(model="m", version="v2", sha256="0" * 64))[0])  # doctest: +ELLIPSIS
    base model: the artifact's sha256 is 5717b9e3...f879c9, the request names 0000000000000000...: not the ...
    """
    problems = list(check.problems)
    if check.base.digest != release.sha256:
        problems.append(
            f"base model: the artifact's sha256 is {check.base.digest}, the request names {(release.sha256 or '')[:16]}"
            "...: not the artifact requested"
        )
    for name, adapter in sorted((release.adapters or {}).items()):
        folder = adapter.path.strip("/")
        found = check.adapters.get(folder)
        if found is None:
            present = ", ".join(sorted(check.adapters)) or "none"
            problems.append(f"adapter {name}: folder {folder} is not in the artifact (adapter folders: {present})")
        elif found.digest != adapter.sha256:
            problems.append(
                f"adapter {name} {adapter.version}: the artifact's {folder} has sha256 {found.digest}, the request "
                f"names {adapter.sha256[:16]}...: not the adapter requested"
            )
    return problems


def gate_artifact(check: ArtifactCheck, release: Release, model_data_url: str) -> ArtifactGateResult:
    """Pass the artifact or refuse it.

    Raises
    ------
    ArtifactRefusedError
        Listing every problem (``; ``-separated), each naming its file, adapter or checksum.
    """
    problems = release_problems(check, release)
    if problems:
        raise ArtifactRefusedError(f"{model_data_url} refused by the artifact gate: " + "; ".join(problems))
    return ArtifactGateResult(
        model_data_url=model_data_url,
        base_sha256=check.base.digest,
        adapters={name: adapter.sha256 for name, adapter in sorted((release.adapters or {}).items())},
        files=len(check.base.files) + sum(len(a.files) for a in check.adapters.values()),
        tokenizer_check=check.tokenizer_check,
    )
