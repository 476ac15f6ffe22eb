"""The model artifact gate: before any traffic, the extracted artifact holds what vLLM needs and nothing unsafe.

One artifact is the base model at its root (``config.json``, tokenizer files, ``*.safetensors``) and LoRA
adapters in folders of their own (any folder holding an ``adapter_config.json`` or adapter weights, e.g.
``adapters/jp_style`` or ``adapters/manga_domain/v4``). :func:`check_artifact` judges a :class:`Snapshot` of
it and returns every problem at once, each naming its file, with the sha256 of every file for the registry:

- weights are safetensors only: pickle-based formats (``*.bin``, ``*.pt``, ...) can run code when loaded and
  are refused wherever they are, as are links (an artifact holds regular files only);
- ``config.json``, the tokenizer and the base weights load (:mod:`~fleetops.promotion.artifact_base`,
  :mod:`~fleetops.promotion.artifact_tokenizer`; the tokenizer check is structural, not a library load);
- each adapter fits the engine and the base (:mod:`~fleetops.promotion.artifact_adapters`).
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field

from fleetops.promotion.artifact_adapters import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    DEFAULT_MAX_LORA_RANK,
    AdapterShape,
    check_adapter,
    shared_problems,
)
from fleetops.promotion.artifact_base import check_base
from fleetops.promotion.artifact_snapshot import Snapshot, suffix
from fleetops.validation import StrictModel

#: Formats that unpickle (or may) when loaded: loading one can execute whatever the file's author wrote.
REFUSED_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib", ".npy", ".npz")
_ADAPTER_MARKERS = (ADAPTER_CONFIG, ADAPTER_WEIGHTS, "adapter_model.bin")


class Checksums(StrictModel):
    """sha256 of every file of one part (the base, or one adapter), paths relative to the part's folder."""

    files: dict[str, str] = Field(description="relative path -> sha256, as sha256sum prints it")
    digest: str = Field(
        description="sha256 of the sha256sum listing of the files sorted by path (`sha256sum <sorted paths> | "
        "sha256sum` in the folder): one checksum for the whole part, for the registry and the rollout request"
    )


class ArtifactCheck(StrictModel):
    """The gate's verdict on one artifact."""

    ok: bool
    problems: tuple[str, ...] = Field(description="each names the file and what is wrong with it")
    base: Checksums
    adapters: dict[str, Checksums] = Field(description="adapter folder (relative to the artifact) -> checksums")
    max_lora_rank: int
    tokenizer_check: Literal["structural"] = "structural"


def checksums(files: dict[str, str]) -> Checksums:
    """The checksums of one part, with its digest over the ``sha256sum`` listing.

    Examples
    --------
    >>> checksums({"b.json": "2" * 64, "a.json": "1" * 64}).digest == hashlib.sha256(
    ...     f"{'1' * 64}  a.json\\n{'2' * 64}  b.json\\n".encode()).hexdigest()
    True
    """
    listing = "".join(f"{files[path]}  {path}\n" for path in sorted(files))
    return Checksums(files=dict(sorted(files.items())), digest=hashlib.sha256(listing.encode()).hexdigest())


def adapter_folders(paths: list[str]) -> list[str]:
    """The folders holding an adapter: those with an adapter config or adapter weights in them.

    Examples
    --------
    >>> adapter_folders(["config.json", "adapters/jp/adapter_config.json", "adapters/m/v4/adapter_model.safetensors"])
    ['adapters/jp', 'adapters/m/v4']
    """
    folders = {p.rpartition("/")[0] for p in paths if p.rpartition("/")[2] in _ADAPTER_MARKERS}
    return sorted(f for f in folders if f)


def _owner(path: str, folders: list[str]) -> str | None:
    return next((f for f in folders if path.startswith(f + "/")), None)


def check_artifact(
    snapshot: Snapshot, *, max_lora_rank: int = DEFAULT_MAX_LORA_RANK, base_model: str | None = None
) -> ArtifactCheck:
    """Judge an extracted artifact: ``ok`` when nothing is wrong, else every problem, each naming its file.

    ``base_model``, when given, is the name each adapter's ``base_model_name_or_path`` must end with (a hub id
    or a path); without it the adapters must merely agree with each other.

    Examples
    --------
    >>> check_artifact(Snapshot(files={})).problems[0]
    'config.json: missing'
    """
    folders = adapter_folders(list(snapshot.files))
    problems = [f"{path}: a link, not a regular file (an artifact holds files only)" for path in snapshot.links]
    problems += [
        f"{path}: {suffix(path)} files are refused: pickle-based formats can run code when loaded (ship safetensors)"
        for path in sorted(snapshot.files)
        if suffix(path) in REFUSED_SUFFIXES
    ]
    base_files = {p: f for p, f in snapshot.files.items() if _owner(p, folders) is None}
    base = check_base(base_files)
    problems += base.problems
    shapes: dict[str, AdapterShape] = {}
    for folder in folders:
        adapter_problems, shape = check_adapter(folder, snapshot.under(folder), base.modules, max_lora_rank)
        problems += adapter_problems
        if shape:
            shapes[folder] = shape
    problems += shared_problems(shapes, base_model)
    return ArtifactCheck(
        ok=not problems,
        problems=tuple(problems),
        base=checksums({p: f.sha256 for p, f in base_files.items()}),
        adapters={folder: checksums({p: f.sha256 for p, f in snapshot.under(folder).items()}) for folder in folders},
        max_lora_rank=max_lora_rank,
    )
