"""What the artifact gate knows of an extracted model artifact: every file's size and sha256, and the bytes it reads.

A reader (:mod:`fleetops.promotion.artifact_files`) fills a :class:`Snapshot` from a folder; the decisions
(:mod:`fleetops.promotion.artifact`) take only the snapshot, so they are tested on bytes, with no disk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from fleetops.promotion.safetensors_header import HeaderError, Tensor, parse_header

#: Files whose content the gate parses (configs and tokenizers); weights are only hashed and their headers read.
READ_SUFFIX = ".json"
WEIGHTS_SUFFIX = ".safetensors"
#: A JSON file larger than this is not a config or tokenizer (Llama 3's tokenizer.json is 9 MB): not read.
MAX_JSON_BYTES = 64 * 1024 * 1024
#: The most entries (files, folders, links) an artifact may hold. A model is tens of files (config, tokenizer,
#: weight shards, a few adapters); millions of tiny ones would keep the gate busy until its function times out.
MAX_ARTIFACT_FILES = 2000
#: The most bytes an artifact's files may add up to, uncompressed: a 16 GB bf16 8B model and its adapters fit
#: four times over; more would not stream through the gate's function within its 15 minutes anyway.
MAX_ARTIFACT_BYTES = 64 * 2**30
#: The most JSON bytes (configs, tokenizers) the gate holds to parse them: the per-file cap alone would let a
#: few dozen 60 MB JSON files exhaust the function's memory.
MAX_READ_BYTES = 256 * 2**20


@dataclass(frozen=True)
class FileFacts:
    """One regular file: ``content`` for a ``*.json`` file, ``head`` (prefix and header) for a ``*.safetensors``."""

    size: int
    sha256: str
    content: bytes | None = None
    head: bytes | None = None


@dataclass(frozen=True)
class Snapshot:
    """Relative POSIX path -> facts for every regular file; ``links`` are the paths that were not regular files."""

    files: dict[str, FileFacts]
    links: tuple[str, ...] = field(default=())

    def under(self, folder: str) -> dict[str, FileFacts]:
        """The files inside ``folder`` (``""``: all), keyed by their path relative to it."""
        if not folder:
            return dict(self.files)
        prefix = folder.rstrip("/") + "/"
        return {path.removeprefix(prefix): facts for path, facts in self.files.items() if path.startswith(prefix)}


class ArtifactLimitError(ValueError):
    """The artifact is larger than the gate reads; the message names the cap and the entry where it stopped."""


@dataclass(frozen=True)
class SnapshotLimits:
    """What one artifact may hold before the gate stops reading it (each cap is named when it refuses)."""

    max_files: int = MAX_ARTIFACT_FILES
    max_bytes: int = MAX_ARTIFACT_BYTES
    max_read_bytes: int = MAX_READ_BYTES


def size_text(size: int) -> str:
    """A byte count as people read it.

    Examples
    --------
    >>> size_text(64 * 2**30), size_text(256 * 2**20), size_text(1500)
    ('64 GiB', '256 MiB', '1500 bytes')
    """
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} bytes"


def keeps_content(name: str, size: int) -> bool:
    """Whether the gate holds a file's bytes to parse them (a JSON file within the per-file cap)."""
    return name.endswith(READ_SUFFIX) and size <= MAX_JSON_BYTES


@dataclass
class Tally:
    """Entries and bytes admitted so far; a reader admits each entry by its declared size *before* reading it,
    so an artifact past a cap is refused without unpacking the rest (a gzip bomb stops at its first header)."""

    limits: SnapshotLimits = field(default_factory=SnapshotLimits)
    entries: int = 0
    size: int = 0
    read: int = 0

    def admit(self, path: str, size: int) -> None:
        """Count one entry of ``size`` bytes.

        Raises
        ------
        ArtifactLimitError
            Naming the entry and the cap it would pass.

        Examples
        --------
        >>> tally = Tally(SnapshotLimits(max_files=1))
        >>> tally.admit("config.json", 10)
        >>> tally.admit("tokenizer.json", 10)
        Traceback (most recent call last):
        ...
        fleetops.promotion.artifact_snapshot.ArtifactLimitError: tokenizer.json: more than 1 entries (files, \
folders, links): above the gate's cap of 1 per artifact (a model is tens of files)
        """
        limits = self.limits
        self.entries += 1
        self.size += size
        if self.entries > limits.max_files:
            raise ArtifactLimitError(
                f"{path}: more than {limits.max_files} entries (files, folders, links): above the gate's cap of "
                f"{limits.max_files} per artifact (a model is tens of files)"
            )
        if self.size > limits.max_bytes:
            raise ArtifactLimitError(
                f"{path}: the files add up to more than {size_text(limits.max_bytes)} uncompressed ({self.size} "
                f"bytes with this one): above the gate's cap of {size_text(limits.max_bytes)} per artifact"
            )
        if keeps_content(path, size):
            self.read += size
            if self.read > limits.max_read_bytes:
                raise ArtifactLimitError(
                    f"{path}: the JSON files add up to more than {size_text(limits.max_read_bytes)}: above the "
                    f"gate's cap of {size_text(limits.max_read_bytes)} of configs and tokenizers it reads"
                )


def load_json(path: str, facts: FileFacts | None) -> tuple[Any, str | None]:
    """The parsed JSON of ``path``, or ``None`` and the problem, which names the file.

    Examples
    --------
    >>> load_json("config.json", FileFacts(size=2, sha256="", content=b'{"a":\\n 1,\\n'))
    (None, 'config.json: not valid JSON at line 3 (Expecting property name enclosed in double quotes)')
    >>> load_json("config.json", None)
    (None, 'config.json: missing')
    """
    if facts is None:
        return None, f"{path}: missing"
    if facts.content is None:
        return None, f"{path}: {facts.size} bytes, above the {MAX_JSON_BYTES // 2**20} MiB a JSON file may have"
    try:
        return json.loads(facts.content.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, f"{path}: not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, f"{path}: not valid JSON at line {exc.lineno} ({exc.msg})"


def load_object(path: str, facts: FileFacts | None) -> tuple[dict[str, Any] | None, str | None]:
    """Like :func:`load_json`, and the document must be a JSON object."""
    value, problem = load_json(path, facts)
    if problem is None and not isinstance(value, dict):
        return None, f"{path}: not a JSON object"
    return value, problem


def tensors(path: str, facts: FileFacts) -> tuple[dict[str, Tensor], str | None]:
    """The tensors a ``*.safetensors`` file holds, or the problem naming the file."""
    try:
        return parse_header(facts.head or b"", facts.size), None
    except HeaderError as exc:
        return {}, f"{path}: not a readable safetensors file: {exc}"


def suffix(path: str) -> str:
    """The lower-case suffix of a path (``.bin``), for the refused-format checks."""
    return PurePosixPath(path).suffix.lower()
