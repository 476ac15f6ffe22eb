"""The engine's output: passed on whole, its tail kept bounded, fatal lines noticed as they arrive."""

from __future__ import annotations

import asyncio
import io

import pytest

from gateway.engine_death import DeathCause
from gateway.engine_log import EngineLog

OOM = b"(EngineCore_DP0 pid=214) ERROR [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"
NCCL = b"(Worker_TP1 pid=302) ERROR [multiproc_executor.py:703] RuntimeError: NCCL error: unhandled cuda error"


def test_every_byte_is_passed_on_and_lines_split_across_reads_are_joined() -> None:
    out = io.BytesIO()
    log = EngineLog(out=out)
    chunks = [b"INFO start", b"ing\r\nINFO ready\n", OOM[:30], OOM[30:] + b"\nno newline at the end"]

    for chunk in chunks:
        log.feed(chunk)
    log.close()

    assert out.getvalue() == b"".join(chunks)
    assert log.lines() == ["INFO starting", "INFO ready", OOM.decode(), "no newline at the end"]


def test_the_tail_stays_bounded_in_lines_and_characters() -> None:
    log = EngineLog(out=io.BytesIO(), max_lines=3, line_chars=10)

    log.feed(b"".join(b"line %d %s\n" % (n, b"x" * 50) for n in range(1000)))
    log.feed(b"y" * 30)  # a line with no end yet: held...
    assert log.lines() == ["line 997 x", "line 998 x", "line 999 x"]
    log.feed(b"y" * 30)  # ...but not beyond 4 x line_chars: then kept cut, as a line

    assert log.lines() == ["line 998 x", "line 999 x", "y" * 10]
    assert all(len(line) <= 10 for line in log.lines())


def test_invalid_utf8_is_kept_replaced() -> None:
    log = EngineLog(out=io.BytesIO())
    log.feed(b"bad \xff byte\n")
    assert log.lines() == ["bad \ufffd byte"]


def test_a_fatal_line_is_a_recent_cause_until_it_is_old_or_the_log_is_reset() -> None:
    log = EngineLog(out=io.BytesIO())
    assert log.recent_cause(within_s=60) is None

    log.feed(NCCL + b"\n")
    log.feed(OOM + b"\n")  # both: the table's priority, not the order, decides

    assert log.recent_cause(within_s=60) is DeathCause.CUDA_OOM
    assert log.recent_cause(within_s=60, now=10**9) is None  # long ago
    log.reset()
    assert log.recent_cause(within_s=60) is None and log.lines() == []


def test_a_closed_stderr_does_not_stop_the_tail() -> None:
    out = io.BytesIO()
    out.close()
    log = EngineLog(out=out)
    log.feed(OOM + b"\n")
    assert log.lines() == [OOM.decode()]


def test_the_pump_reads_a_real_pipe_to_its_end() -> None:
    async def run() -> tuple[EngineLog, io.BytesIO]:
        out = io.BytesIO()
        log = EngineLog(out=out)
        process = await asyncio.create_subprocess_exec(
            "sh", "-c", "printf 'INFO a\\n'; printf 'ERROR b' >&2", stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        assert process.stdout is not None
        await asyncio.wait_for(log.pump(process.stdout), timeout=10)
        await process.wait()
        return log, out

    log, out = asyncio.run(run())

    assert log.lines() == ["INFO a", "ERROR b"]
    assert out.getvalue() == b"INFO a\nERROR b"


@pytest.mark.parametrize(("max_lines", "line_chars"), [(0, 10), (10, 0)])
def test_bounds_must_be_positive(max_lines: int, line_chars: int) -> None:
    with pytest.raises(ValueError, match="must be at least 1"):
        EngineLog(out=io.BytesIO(), max_lines=max_lines, line_chars=line_chars)
