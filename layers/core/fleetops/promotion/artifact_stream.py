"""The byte streams under the gate's tarball reader: the object's own sha256, and gunzip with a ceiling.

:class:`HashingReader` hashes the object's bytes as they pass (what the verified copy is named by, see
:mod:`fleetops.promotion.artifact_pin`). :class:`BoundedGunzip` inflates them a bounded piece at a time and
refuses to hand out more than its ``limit``: the tarball reader moves the limit past each member it admitted, so
a gzip bomb hidden where the reader does not count (a pax or long-name header, which :mod:`tarfile` reads whole
into memory) stops a header's allowance later instead of exhausting the function.
"""

from __future__ import annotations

import hashlib
import io
import zlib
from typing import IO, TYPE_CHECKING

from fleetops.promotion.artifact_snapshot import ArtifactLimitError

if TYPE_CHECKING:
    from botocore.response import StreamingBody

#: Compressed bytes read from the object at a time.
RAW_BYTES = 1024 * 1024
#: Uncompressed bytes inflated at a time: zlib inflates up to ~1000x, so one unbounded call could be a gigabyte.
INFLATE_BYTES = 256 * 1024
#: What one member's headers (its tar header, a pax or GNU long-name header before it) may take: kilobytes in
#: any real tarball.
HEADER_BYTES = 1024 * 1024
_GZIP = 16 + zlib.MAX_WBITS


class GzipError(ValueError):
    """The stream is not gzip, or it is cut short."""


class HashingReader:
    """``raw``'s bytes as they are read, hashed and counted."""

    def __init__(self, raw: IO[bytes] | StreamingBody) -> None:
        self._raw = raw
        self._digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = RAW_BYTES) -> bytes:
        chunk = self._raw.read(size)
        self._digest.update(chunk)
        self.size += len(chunk)
        return chunk

    def drain(self) -> None:
        """Read to the end, so the digest covers the whole object (the tar's end padding, trailing bytes)."""
        while self.read(RAW_BYTES):
            pass

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


class BoundedGunzip(io.RawIOBase):
    """The gunzipped bytes of ``source`` (gzip members one after another, as ``gzip -d`` reads them).

    Reading past ``limit`` (bytes handed out since the start) raises :class:`ArtifactLimitError` with ``reason``:
    at most :data:`INFLATE_BYTES` more are ever inflated, however well the stream compresses.

    Examples
    --------
    >>> import gzip, io
    >>> bomb = BoundedGunzip(io.BytesIO(gzip.compress(bytes(10**7))), limit=1000, reason="a test's cap")
    >>> len(bomb.read(600))
    600
    >>> bomb.read(600)
    Traceback (most recent call last):
    ...
    fleetops.promotion.artifact_snapshot.ArtifactLimitError: a test's cap (stopped at 1200 bytes unpacked)
    """

    def __init__(self, source: HashingReader | IO[bytes], limit: int, reason: str) -> None:
        super().__init__()
        self._source = source
        self._inflate = zlib.decompressobj(_GZIP)
        self._started = False  # the current gzip member has had input
        self._buffer = b""
        self._offset = 0
        self._ended = False
        self.handed_out = 0
        self.limit = limit
        self.reason = reason

    def bound(self, limit: int, reason: str) -> None:
        """Hand out at most ``limit`` bytes in all (counted from the start of the stream)."""
        self.limit, self.reason = limit, reason

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._offset == len(self._buffer) and not self._ended:
            self._buffer, self._offset = self._inflate_some(), 0
        end = len(self._buffer) if size < 0 else self._offset + size
        out = self._buffer[self._offset : end]
        self._offset += len(out)
        self.handed_out += len(out)
        if self.handed_out > self.limit:
            raise ArtifactLimitError(f"{self.reason} (stopped at {self.handed_out} bytes unpacked)")
        return out

    def _inflate_some(self) -> bytes:
        """The next piece of output (empty at the end): never more than :data:`INFLATE_BYTES` at once."""
        while True:
            pending = self._inflate.unconsumed_tail
            if not pending and self._inflate.eof:
                # One gzip member ended; bytes after it start the next one (multi-member gzip), or the stream ends.
                pending = self._inflate.unused_data
                self._inflate, self._started = zlib.decompressobj(_GZIP), False
            if not pending:
                pending = self._source.read(RAW_BYTES)
                if not pending:
                    if self._started:
                        raise GzipError("the gzip stream is cut short (truncated upload?)")
                    self._ended = True
                    return b""
            if not self._started and pending[0] == 0:
                # Zeros after a complete member are padding (gzip -d ignores them too); nothing more unpacks.
                self._ended = True
                return b""
            self._started = True
            try:
                out = self._inflate.decompress(pending, INFLATE_BYTES)
            except zlib.error as exc:
                raise GzipError(f"not gzip-compressed (SageMaker unpacks a model.tar.gz): {exc}") from exc
            if out:
                return out
