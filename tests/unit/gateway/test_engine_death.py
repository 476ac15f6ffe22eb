"""Classifying an engine's end from its exit status and the last lines of its log.

The fixtures in ``data/engine_deaths`` are log excerpts in the formats vLLM 0.32's V1 engine, PyTorch, NCCL and the
NVIDIA driver write (process prefixes, logger prefixes, the libraries' own messages), one per way an engine ends.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from gateway.engine_death import OOM_CAUSES, PATTERNS, DeathCause, classify_exit, exit_status, line_cause

DATA = Path(__file__).parent / "data" / "engine_deaths"


def lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


@pytest.mark.parametrize(
    ("fixture", "returncode", "cause", "evidence"),
    [
        # The V1 engine core dies of a CUDA OOM mid-decode; the API server reports EngineDeadError and exits.
        ("cuda_oom_during_decode.log", 0, DeathCause.CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory. Tried"),
        # The same death, then every process of the group SIGKILLed: the log still says why.
        ("cuda_oom_during_decode.log", -signal.SIGKILL, DeathCause.CUDA_OOM, "Tried to allocate 1.95 GiB"),
        ("cuda_error_out_of_memory.log", 1, DeathCause.CUDA_OOM, "RuntimeError: CUDA error: out of memory"),
        # Older torch's class and message, at start-up (KV cache allocation).
        ("cuda_oom_at_start.log", 1, DeathCause.CUDA_OOM, "torch.cuda.OutOfMemoryError: CUDA out of memory"),
        ("cuda_driver_error_out_of_memory.log", 1, DeathCause.CUDA_OOM, "CUDA driver error: out of memory"),
        # One worker ran out of memory and its peer's collective failed after it: the OOM is the cause.
        ("oom_then_nccl.log", 1, DeathCause.CUDA_OOM, "Tried to allocate 512.00 MiB"),
        ("nccl_unhandled_cuda_error.log", 1, DeathCause.NCCL, "RuntimeError: NCCL error: unhandled cuda error"),
        ("nccl_watchdog_timeout.log", -signal.SIGABRT, DeathCause.NCCL, "Watchdog caught collective operation timeout"),
        # A GPU fault that NCCL then reports too: the GPU is the cause.
        ("xid_unspecified_launch_failure.log", 1, DeathCause.XID, "CUDA error: unspecified launch failure"),
        ("xid_fallen_off_the_bus.log", 1, DeathCause.XID, "GPU has fallen off the bus"),
        ("xid_uncorrectable_ecc.log", 1, DeathCause.XID, "uncorrectable ECC error encountered"),
        # No fatal line (memory sizes, NCCL INFO and its exit warning do not count): the exit status decides.
        ("serving_no_error.log", -signal.SIGKILL, DeathCause.KILLED, None),
        ("serving_no_error.log", 137, DeathCause.KILLED, None),
        ("serving_no_error.log", -signal.SIGTERM, DeathCause.OTHER, None),
        ("serving_no_error.log", None, DeathCause.OTHER, None),
        ("bad_model_config.log", 1, DeathCause.OTHER, None),
    ],
)
def test_each_realistic_end_gets_its_cause(
    fixture: str, returncode: int | None, cause: DeathCause, evidence: str | None
) -> None:
    death = classify_exit(returncode, lines(fixture))

    assert death.cause is cause
    if evidence is None:
        assert death.evidence is None
    else:
        assert death.evidence is not None and evidence in death.evidence, death.evidence
    assert death.is_oom is (cause is DeathCause.CUDA_OOM)


def test_the_evidence_is_the_last_matching_line_without_colour_codes_and_cut() -> None:
    coloured = "\x1b[1;36m(EngineCore_DP0 pid=9)\x1b[0;0m ERROR [core.py:1131] torch.OutOfMemoryError: " + "x" * 1000
    death = classify_exit(1, ["torch.OutOfMemoryError: first", coloured, "INFO later line"])

    assert death.evidence is not None
    assert death.evidence.startswith("(EngineCore_DP0 pid=9) ERROR [core.py:1131] torch.OutOfMemoryError: xx")
    assert len(death.evidence) == 300 and death.evidence.endswith("...")


def test_an_empty_log_leaves_the_exit_status_to_decide() -> None:
    assert classify_exit(-signal.SIGKILL, []).cause is DeathCause.KILLED
    assert classify_exit(0, []).cause is DeathCause.OTHER


@pytest.mark.parametrize(
    ("returncode", "words"),
    [
        (1, "exit 1"),
        (-9, "signal 9 (SIGKILL)"),
        (-15, "signal 15 (SIGTERM)"),
        (137, "exit 137 (128 + signal 9, SIGKILL)"),
        (None, "still running"),
    ],
)
def test_the_exit_status_in_words(returncode: int | None, words: str) -> None:
    assert exit_status(returncode) == words
    assert classify_exit(returncode, []).exit_status == words


@pytest.mark.parametrize(
    "line",
    [
        "Available KV cache memory: 60.12 GiB",
        "Memory profiling takes 2.10 seconds",
        "NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        "Warning: WARNING: destroy_process_group() was not called before program exit",
        "MemoryError",  # host memory: the Python error, not CUDA's
        "Xidian university",  # a word that starts like Xid
    ],
)
def test_lines_in_passing_name_no_cause(line: str) -> None:
    assert line_cause(line) is None


def test_every_cause_but_the_exit_status_ones_has_a_pattern_and_only_cuda_oom_counts_as_oom() -> None:
    assert [cause for cause, _ in PATTERNS] == [DeathCause.CUDA_OOM, DeathCause.XID, DeathCause.NCCL]
    assert {DeathCause.CUDA_OOM} == OOM_CAUSES
