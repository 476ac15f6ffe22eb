"""The time budget per test (``devtools.pytest_budget``): an over-long test fails unless marked slow with a reason.

Each case runs pytest in a subprocess on a generated test file, with the budget cut to 0.2 s so that a 0.5 s sleep
is over it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import CAPABILITIES, REPO, TIERS, markers_for

SLEEPY = """
import time

import pytest


def test_unmarked_and_too_long():
    time.sleep(0.5)


@pytest.mark.slow(reason="sleeps on purpose")
def test_marked_slow_with_a_reason():
    time.sleep(0.5)


@pytest.mark.slow
def test_marked_slow_without_a_reason():
    pass


def test_quick():
    pass


def test_too_long_and_failing_anyway():
    time.sleep(0.5)
    assert False, "its own failure"
"""


def run_pytest(tmp_path: Path, *options: str) -> str:
    (tmp_path / "test_sleepy.py").write_text(SLEEPY)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "devtools.pytest_budget", "-p", "no:cacheprovider", "-rA", *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout + done.stderr


def outcome(output: str, test: str) -> str:
    """``PASSED`` or ``FAILED`` from pytest's short summary for ``test``."""
    for line in output.splitlines():
        if line.endswith(f"::{test}") or f"::{test} " in line:
            return line.split()[0]
    raise AssertionError(f"{test} not in the summary:\n{output}")


def test_a_test_over_the_budget_fails_naming_the_budget_and_the_way_out(tmp_path: Path) -> None:
    output = run_pytest(tmp_path, "-o", "call_budget_s=0.2")

    assert outcome(output, "test_unmarked_and_too_long") == "FAILED", output
    assert "over the 0.2 s budget per test (call_budget_s)" in output, output
    assert "@pytest.mark.slow(reason='...')" in output, output
    assert outcome(output, "test_marked_slow_with_a_reason") == "PASSED", output
    assert outcome(output, "test_quick") == "PASSED", output
    # A test's own failure is reported as it is, not replaced by the budget's message.
    assert "its own failure" in output, output


def test_a_slow_mark_without_a_reason_fails(tmp_path: Path) -> None:
    output = run_pytest(tmp_path, "-o", "call_budget_s=0.2")

    assert outcome(output, "test_marked_slow_without_a_reason") == "FAILED", output
    assert "@pytest.mark.slow needs a reason" in output, output


def test_budget_zero_switches_the_check_off(tmp_path: Path) -> None:
    output = run_pytest(tmp_path, "-o", "call_budget_s=0")

    assert outcome(output, "test_unmarked_and_too_long") == "PASSED", output


def test_the_project_budget_is_60_s() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()

    assert 'call_budget_s = "60"' in pyproject


def test_markers_follow_the_folder_and_are_registered() -> None:
    tests = REPO / "tests"

    assert markers_for(tests / "unit" / "rollout" / "test_plan.py") == ["unit", "rollout"]
    assert markers_for(tests / "integration" / "test_prescale_handler.py") == ["integration", "prescale"]
    assert markers_for(tests / "container" / "test_gateway_drain.py") == ["container", "gateway"]
    pyproject = (REPO / "pyproject.toml").read_text()
    for name in (*TIERS, *CAPABILITIES):
        assert f'"{name}:' in pyproject, f"marker {name} is not registered in pyproject.toml"
