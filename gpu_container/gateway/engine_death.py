"""Why the engine died: its exit status and the last lines of its log, matched against one table of patterns.

vLLM's V1 engine core does not survive a CUDA error: it logs the traceback (``EngineCore encountered a fatal
error``), the API server answers what was in flight with ``EngineDeadError`` ("See stack trace (above) for the
root cause") and exits. The root cause is only in the log, so the supervisor keeps its tail
(:mod:`gateway.engine_log`) and :func:`classify_exit` reads it:

- ``cuda_oom``: PyTorch's allocator (``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...``, the
  older ``torch.cuda.OutOfMemoryError``) or a CUDA call (``CUDA error: out of memory``, ``CUDA driver error: out
  of memory``);
- ``xid``: the GPU itself failed (an ``Xid`` line, ``GPU has fallen off the bus``, ``unspecified launch failure``,
  ``uncorrectable ECC error encountered``);
- ``nccl``: the collectives between GPUs (``NCCL error``, an ``nccl*Error`` code, the NCCL watchdog's timeout);
- ``killed``: no such line, and the process ended by SIGKILL (the kernel's OOM killer for host memory, or a
  person): exit status -9, or 137 where a shell reports it;
- ``other``: anything else (a Python exception, a bad model, an exit the log does not explain).

A line beats the exit status: after a worker's CUDA error, the processes around it may end by any signal. The
table is in priority order: an out-of-memory error that NCCL then reports stays ``cuda_oom``, and a GPU that fell
off the bus stays ``xid`` whatever NCCL said about it.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable


class DeathCause(StrEnum):
    """Why the engine ended: the ``Cause`` dimension, the death record's ``cause``, the request log's
    ``engine_death_cause``."""

    CUDA_OOM = "cuda_oom"
    XID = "xid"
    NCCL = "nccl"
    KILLED = "killed"
    OTHER = "other"


#: The causes counted in ``OomCaught``. ``killed`` is not: a SIGKILL does not say who sent it.
OOM_CAUSES: frozenset[DeathCause] = frozenset({DeathCause.CUDA_OOM})

#: Log patterns, in priority order (the first cause with a matching line wins). Each names the exact text the
#: library writes, so a word in passing ("memory", "NCCL INFO ...") does not match.
PATTERNS: tuple[tuple[DeathCause, re.Pattern[str]], ...] = (
    (
        DeathCause.CUDA_OOM,
        re.compile(
            r"OutOfMemoryError"  # torch.OutOfMemoryError, torch.cuda.OutOfMemoryError
            r"|CUDA out of memory"  # the caching allocator's message
            r"|CUDA error: out of memory"  # cudaErrorMemoryAllocation through C10_CUDA_CHECK
            r"|CUDA driver error: out of memory"  # CUDA_ERROR_OUT_OF_MEMORY from a driver call
        ),
    ),
    (
        DeathCause.XID,
        re.compile(
            r"\bXid\b"  # the driver's "NVRM: Xid (PCI:...): 79, ..." where the kernel log reaches the engine's
            r"|GPU has fallen off the bus"
            r"|unspecified launch failure"  # cudaErrorLaunchFailure: what a process sees of most Xid faults
            r"|uncorrectable ECC error encountered"  # cudaErrorECCUncorrectable
        ),
    ),
    (
        DeathCause.NCCL,
        re.compile(
            r"NCCL error"  # vLLM's pynccl and torch's ProcessGroupNCCL: "NCCL error: unhandled system error"
            r"|\bnccl(?:UnhandledCuda|System|Internal|InvalidUsage|Remote)Error\b"
            r"|Watchdog caught collective operation timeout"
            r"|NCCL communicator was aborted"
        ),
    ),
)

#: Exit statuses of a SIGKILL: the negative signal number (Python) and the shell's 128 + 9.
_SIGKILL_STATUSES = frozenset({-signal.SIGKILL, 128 + signal.SIGKILL})
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: The evidence line is quoted in logs and EMF records: long enough for PyTorch's OOM sentence, not a whole dump.
EVIDENCE_CHARS = 300


@dataclass(frozen=True)
class EngineDeath:
    """One classified engine exit.

    Attributes
    ----------
    cause
        The :class:`DeathCause`.
    exit_status
        How the process ended, in words: ``exit 1``, ``signal 9 (SIGKILL)``, or ``still running`` (it stopped
        answering its health check and the gateway stopped it).
    evidence
        The log line that decided the cause (its last occurrence, colour codes removed, cut to
        ``EVIDENCE_CHARS``), or ``None`` when the exit status decided.
    """

    cause: DeathCause
    exit_status: str
    evidence: str | None

    @property
    def is_oom(self) -> bool:
        return self.cause in OOM_CAUSES

    def describe(self) -> str:
        """One line for the gateway's log.

        Examples
        --------
        >>> EngineDeath(DeathCause.KILLED, "signal 9 (SIGKILL)", None).describe()
        'cause killed (signal 9 (SIGKILL))'
        """
        said = f": {self.evidence}" if self.evidence else ""
        return f"cause {self.cause} ({self.exit_status}){said}"


def line_cause(line: str) -> DeathCause | None:
    """The cause a single log line names, if any (the highest-priority pattern it matches).

    Examples
    --------
    >>> line_cause("(EngineCore_DP0 pid=91) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA out of "
    ...            "memory. Tried to allocate 50.00 MiB.")
    <DeathCause.CUDA_OOM: 'cuda_oom'>
    >>> line_cause("NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>") is None
    True
    """
    for cause, pattern in PATTERNS:
        if pattern.search(line):
            return cause
    return None


def exit_status(returncode: int | None) -> str:
    """How a process ended, in words.

    Examples
    --------
    >>> exit_status(1), exit_status(-9), exit_status(137), exit_status(None)
    ('exit 1', 'signal 9 (SIGKILL)', 'exit 137 (128 + signal 9, SIGKILL)', 'still running')
    """
    if returncode is None:
        return "still running"
    if returncode < 0:
        return f"signal {-returncode} ({_signal_name(-returncode)})"
    if returncode > 128 and returncode - 128 < signal.NSIG:
        return f"exit {returncode} (128 + signal {returncode - 128}, {_signal_name(returncode - 128)})"
    return f"exit {returncode}"


def classify_exit(returncode: int | None, lines: Iterable[str]) -> EngineDeath:
    """Classify an engine's end from its exit status and the last lines of its log.

    Parameters
    ----------
    returncode
        The process's exit status as :mod:`asyncio` reports it (negative: killed by that signal), or ``None``
        when it was still running (the gateway stopped it after failed health checks or a start timeout).
    lines
        The last lines of its output (stdout and stderr together), oldest first.

    Examples
    --------
    >>> tail = ["ERROR [core.py:1131] EngineCore encountered a fatal error.",
    ...         "ERROR [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB.",
    ...         "ERROR [serving.py:1173] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."]
    >>> classify_exit(-9, tail).cause, classify_exit(-9, tail).evidence[-35:]
    (<DeathCause.CUDA_OOM: 'cuda_oom'>, 'memory. Tried to allocate 1.95 GiB.')
    >>> classify_exit(-9, tail[2:]).cause, classify_exit(1, tail[2:]).cause
    (<DeathCause.KILLED: 'killed'>, <DeathCause.OTHER: 'other'>)
    """
    found: dict[DeathCause, str] = {}
    for line in lines:
        cause = line_cause(line)
        if cause is not None:
            found[cause] = line  # the last occurrence: usually the exception's own line, after its traceback
    status = exit_status(returncode)
    for cause, _ in PATTERNS:
        if cause in found:
            return EngineDeath(cause, status, _evidence(found[cause]))
    if returncode in _SIGKILL_STATUSES:
        return EngineDeath(DeathCause.KILLED, status, None)
    return EngineDeath(DeathCause.OTHER, status, None)


def _evidence(line: str) -> str:
    clean = _ANSI.sub("", line).strip()
    return clean if len(clean) <= EVIDENCE_CHARS else clean[: EVIDENCE_CHARS - 3] + "..."


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
