"""Read an extracted artifact folder into a :class:`Snapshot` (the only part of the gate that touches the disk).

Every regular file is hashed in chunks (weights are gigabytes); only JSON files are read whole, and only
the header of a safetensors file. Links are listed, not followed: a link could make the gate hash and
approve a file outside the artifact.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from fleetops.promotion.artifact import ArtifactCheck, check_artifact
from fleetops.promotion.artifact_adapters import DEFAULT_MAX_LORA_RANK
from fleetops.promotion.artifact_snapshot import MAX_JSON_BYTES, READ_SUFFIX, WEIGHTS_SUFFIX, FileFacts, Snapshot
from fleetops.promotion.safetensors_header import PREFIX_BYTES, HeaderError, header_length

_CHUNK = 1024 * 1024


def _facts(path: Path) -> FileFacts:
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
        stream.seek(0)
        content = stream.read() if path.name.endswith(READ_SUFFIX) and size <= MAX_JSON_BYTES else None
        head = None
        if path.name.endswith(WEIGHTS_SUFFIX):
            prefix = stream.read(PREFIX_BYTES)
            try:
                head = prefix + stream.read(header_length(prefix))
            except HeaderError:
                head = prefix  # the decision names the problem; reading on would read a pickle's bytes for nothing
    return FileFacts(size=size, sha256=digest.hexdigest(), content=content, head=head)


def read_snapshot(root: Path) -> Snapshot:
    """Every regular file under ``root`` by its POSIX path relative to it; links and other entries apart."""
    files: dict[str, FileFacts] = {}
    links: list[str] = []
    for folder, dirs, names in os.walk(root):  # os.walk does not descend into linked folders
        here = Path(folder)
        for name in sorted(names) + [d for d in dirs if (here / d).is_symlink()]:
            path = here / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink() or not path.is_file():
                links.append(relative)
            else:
                files[relative] = _facts(path)
    return Snapshot(files=files, links=tuple(sorted(links)))


def check_folder(
    root: Path, *, max_lora_rank: int = DEFAULT_MAX_LORA_RANK, base_model: str | None = None
) -> ArtifactCheck:
    """Read and judge the artifact extracted into ``root`` (see :func:`fleetops.promotion.artifact.check_artifact`)."""
    return check_artifact(read_snapshot(root), max_lora_rank=max_lora_rank, base_model=base_model)
