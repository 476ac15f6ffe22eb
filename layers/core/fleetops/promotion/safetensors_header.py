"""The safetensors header, read without loading a tensor: which tensors a weights file holds and their shapes.

A safetensors file is an 8-byte little-endian header length, a JSON header (tensor name -> dtype, shape
and data offsets, plus an optional ``__metadata__``), then the raw data. Parsing the header directly keeps
the artifact gate free of torch and of the ``safetensors`` package (neither is in the Lambda layer), and
reading only the header keeps a 16 GB shard from being read into memory.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass

#: Bytes of the length prefix.
PREFIX_BYTES = 8
#: A header larger than this is not a real one (the format itself caps it at 100 MB); refuse to read it.
MAX_HEADER_BYTES = 100 * 1024 * 1024


class HeaderError(ValueError):
    """The file is not a readable safetensors file; the message says why."""


@dataclass(frozen=True)
class Tensor:
    dtype: str
    shape: tuple[int, ...]


def header_length(prefix: bytes) -> int:
    """The JSON header's length from the first 8 bytes.

    Examples
    --------
    >>> header_length((12).to_bytes(8, "little"))
    12
    >>> header_length(b"PK")
    Traceback (most recent call last):
    ...
    fleetops.promotion.safetensors_header.HeaderError: shorter than the 8-byte header length
    """
    if len(prefix) < PREFIX_BYTES:
        raise HeaderError("shorter than the 8-byte header length")
    length: int = struct.unpack("<Q", prefix[:PREFIX_BYTES])[0]
    if length > MAX_HEADER_BYTES:
        raise HeaderError(f"header length {length} bytes is not plausible (a pickle or a corrupt file?)")
    return length


def parse_header(head: bytes, file_size: int) -> dict[str, Tensor]:
    """The tensors of a safetensors file from its first bytes (prefix and header) and its size.

    The data offsets are checked against the file size, so a file cut short by an interrupted upload is
    refused here rather than when the engine loads it.

    Examples
    --------
    >>> header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    >>> head = len(header).to_bytes(8, "little") + header
    >>> parse_header(head, len(head) + 8)
    {'w': Tensor(dtype='BF16', shape=(2, 2))}
    >>> parse_header(head, len(head) + 4)
    Traceback (most recent call last):
    ...
    fleetops.promotion.safetensors_header.HeaderError: tensor 'w' ends at byte 8 of 4 data bytes (truncated?)
    """
    length = header_length(head)
    raw = head[PREFIX_BYTES : PREFIX_BYTES + length]
    if len(raw) < length:
        raise HeaderError(f"header of {length} bytes is cut short (truncated?)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HeaderError(f"header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise HeaderError("header is not a JSON object")
    data_bytes = file_size - PREFIX_BYTES - length
    tensors: dict[str, Tensor] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor(name, entry, data_bytes)
    return tensors


def _tensor(name: str, entry: object, data_bytes: int) -> Tensor:
    if not isinstance(entry, dict):
        raise HeaderError(f"tensor {name!r} is not described by an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
        raise HeaderError(f"tensor {name!r} has no dtype or shape")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        raise HeaderError(f"tensor {name!r} has no data_offsets")
    if offsets[1] > data_bytes or offsets[0] > offsets[1]:
        raise HeaderError(f"tensor {name!r} ends at byte {offsets[1]} of {data_bytes} data bytes (truncated?)")
    return Tensor(dtype=dtype, shape=tuple(shape))


def module_names(tensor_names: Iterable[str]) -> frozenset[str]:
    """Every module path the tensors belong to, parents included, as peft matches ``target_modules`` against.

    Examples
    --------
    >>> sorted(module_names(["model.layers.0.self_attn.q_proj.weight"]))
    ['model', 'model.layers', 'model.layers.0', 'model.layers.0.self_attn', 'model.layers.0.self_attn.q_proj']
    """
    names: set[str] = set()
    for tensor in tensor_names:
        parts = tensor.split(".")[:-1]  # drop "weight" / "bias": a parameter, not a module
        names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return frozenset(names)
