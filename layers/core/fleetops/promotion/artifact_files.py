"""Read an extracted artifact folder into a :class:`Snapshot` (the only part of the gate that touches the disk).

Every regular file is hashed in chunks (weights are gigabytes); only JSON files are read whole, and only
the header of a safetensors file (:func:`file_facts`, which the S3 reader streams through as well). Links
are listed, not followed: a link could make the gate hash and approve a file outside the artifact.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from fleetops.promotion.artifact import ArtifactCheck, check_artifact
from fleetops.promotion.artifact_adapters import DEFAULT_MAX_LORA_RANK
from fleetops.promotion.artifact_snapshot import (
    WEIGHTS_SUFFIX,
    FileFacts,
    Snapshot,
    SnapshotLimits,
    Tally,
    keeps_content,
)
from fleetops.promotion.safetensors_header import PREFIX_BYTES, HeaderError, header_length

#: Bytes read at a time while hashing (weights are gigabytes).
CHUNK_BYTES = 1024 * 1024


def file_facts(name: str, size: int, chunks: Iterable[bytes]) -> FileFacts:
    """Hash one file as its bytes stream by, keeping what the decisions read: a JSON file whole, a safetensors
    file's 8-byte prefix and header. Nothing else is held, so a file of any size takes one pass and no disk.

    Examples
    --------
    >>> head = (2).to_bytes(8, "little") + b"{}"
    >>> facts = file_facts("model.safetensors", 14, [head[:5], head[5:] + b"tail"])
    >>> facts.head == head, facts.content
    (True, None)
    """
    digest = hashlib.sha256()
    keep_all = keeps_content(name, size)
    content = bytearray()
    head = bytearray()
    head_wanted = PREFIX_BYTES if name.endswith(WEIGHTS_SUFFIX) else 0
    header_known = False
    for chunk in chunks:
        digest.update(chunk)
        if keep_all:
            content += chunk
        rest = chunk
        while len(head) < head_wanted and rest:
            taken = head_wanted - len(head)
            head += rest[:taken]
            rest = rest[taken:]
            if not header_known and len(head) == PREFIX_BYTES:
                header_known = True
                # A bad prefix: the decision names the problem; reading on would keep a pickle's bytes for nothing.
                with contextlib.suppress(HeaderError):
                    head_wanted += header_length(bytes(head))
    return FileFacts(
        size=size,
        sha256=digest.hexdigest(),
        content=bytes(content) if keep_all else None,
        head=bytes(head) if head_wanted else None,
    )


def read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    """A binary stream's bytes, :data:`CHUNK_BYTES` at a time."""
    while chunk := stream.read(CHUNK_BYTES):
        yield chunk


def _facts(path: Path) -> FileFacts:
    with path.open("rb") as stream:
        return file_facts(path.name, path.stat().st_size, read_chunks(stream))


def read_snapshot(root: Path, limits: SnapshotLimits | None = None) -> Snapshot:
    """Every regular file under ``root`` by its POSIX path relative to it; links and other entries apart.

    Raises
    ------
    ArtifactLimitError
        When the folder holds more than ``limits`` allow (checked before each file is read).
    """
    files: dict[str, FileFacts] = {}
    links: list[str] = []
    tally = Tally(limits or SnapshotLimits())
    for folder, dirs, names in os.walk(root):  # os.walk does not descend into linked folders
        here = Path(folder)
        for name in sorted(names) + [d for d in dirs if (here / d).is_symlink()]:
            path = here / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink() or not path.is_file():
                tally.admit(relative, 0)
                links.append(relative)
            else:
                tally.admit(relative, path.stat().st_size)
                files[relative] = _facts(path)
    return Snapshot(files=files, links=tuple(sorted(links)))


def check_folder(
    root: Path, *, max_lora_rank: int = DEFAULT_MAX_LORA_RANK, base_model: str | None = None
) -> ArtifactCheck:
    """Read and judge the artifact extracted into ``root`` (see :func:`fleetops.promotion.artifact.check_artifact`)."""
    return check_artifact(read_snapshot(root), max_lora_rank=max_lora_rank, base_model=base_model)
