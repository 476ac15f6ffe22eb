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
