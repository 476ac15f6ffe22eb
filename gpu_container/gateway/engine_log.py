"""The engine's output, passed through to the gateway's stderr, with its last lines kept to explain a death.

The supervisor starts the engine with stdout and stderr on one pipe and :meth:`EngineLog.pump` reads it: every
byte goes on to the gateway's stderr as before (CloudWatch Logs still gets the engine's log whole), the last
``max_lines`` lines stay in memory (bounded, whatever the engine writes) for :func:`gateway.engine_death.classify_exit`,
and each line is matched as it arrives, so a request that fails while the engine is dying can already be told why
(:meth:`EngineLog.recent_cause`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, BinaryIO

from gateway.engine_death import PATTERNS, DeathCause, line_cause

if TYPE_CHECKING:
    import asyncio

#: Lines kept: a vLLM traceback through the engine core and its workers is 60-150 lines, its last line the error.
TAIL_LINES = 400
#: A longer line is kept cut (the pipe is still read whole and passed on whole).
LINE_CHARS = 4000
_READ_BYTES = 65536
_PRIORITY = {cause: rank for rank, (cause, _) in enumerate(PATTERNS)}


class EngineLog:
    """The tail of one engine process's output (call :meth:`reset` for each new process).

    Parameters
    ----------
    out
        Where the output is passed on (the gateway's stderr); ``None`` means ``sys.stderr.buffer`` at construction.
    max_lines, line_chars
        Bounds of the kept tail.

    Examples
    --------
    >>> import io
    >>> log = EngineLog(out=io.BytesIO(), max_lines=2)
    >>> log.feed(b"INFO loading\\nERROR torch.OutOfMemoryError: CUDA out of memory.\\nERROR Engine")
    >>> log.feed(b"DeadError\\n")
    >>> log.lines()
    ['ERROR torch.OutOfMemoryError: CUDA out of memory.', 'ERROR EngineDeadError']
    >>> log.recent_cause(within_s=60)
    <DeathCause.CUDA_OOM: 'cuda_oom'>
    """

    def __init__(self, out: BinaryIO | None = None, max_lines: int = TAIL_LINES, line_chars: int = LINE_CHARS) -> None:
        if max_lines < 1 or line_chars < 1:
            raise ValueError(f"max_lines and line_chars must be at least 1, got {max_lines} and {line_chars}")
        self._out = out if out is not None else sys.stderr.buffer
        self._line_chars = line_chars
        self._tail: deque[str] = deque(maxlen=max_lines)
        self._partial = bytearray()
        self._fatal: dict[DeathCause, float] = {}  # when each cause's last line was read

    def reset(self) -> None:
        """Forget the previous process's lines: a new engine's death is explained by its own log only."""
        self._tail.clear()
        self._partial.clear()
        self._fatal.clear()

    def feed(self, chunk: bytes) -> None:
        """Pass ``chunk`` on and keep its complete lines (a line split across reads is joined first)."""
        with contextlib.suppress(OSError, ValueError):  # a closed stderr must not stop the engine's pipe being read
            self._out.write(chunk)
            self._out.flush()
        self._partial += chunk
        *complete, rest = bytes(self._partial).split(b"\n")
        if len(rest) > self._line_chars * 4:  # a line without end: keep its start, do not grow without bound
            complete.append(rest)
            rest = b""
        self._partial = bytearray(rest)
        for raw in complete:
            self._keep(raw)

    def close(self) -> None:
        """End of the output: keep a last line that had no newline."""
        if self._partial:
            self._keep(bytes(self._partial))
            self._partial.clear()

    async def pump(self, stream: asyncio.StreamReader) -> None:
        """Read the engine's output until it closes (every process holding the pipe has exited)."""
        try:
            while chunk := await stream.read(_READ_BYTES):
                self.feed(chunk)
        finally:
            self.close()

    def lines(self) -> list[str]:
        """The kept lines, oldest first."""
        return list(self._tail)

    def recent_cause(self, within_s: float, now: float | None = None) -> DeathCause | None:
        """The cause of the fatal lines (see :data:`gateway.engine_death.PATTERNS`) read in the last ``within_s``
        seconds, the first in the table's priority order where several were; ``None`` when there were none."""
        now = time.monotonic() if now is None else now
        recent = [cause for cause, seen in self._fatal.items() if now - seen <= within_s]
        return min(recent, key=_PRIORITY.__getitem__, default=None)

    def _keep(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")[: self._line_chars]
        self._tail.append(line)
        cause = line_cause(line)
        if cause is not None:
            self._fatal[cause] = time.monotonic()
