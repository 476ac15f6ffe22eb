"""``make test-durations`` (``devtools.pytest_durations``): seconds by folder, file and fixture set-up, xdist too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SUITE = {
    "conftest.py": """
import time

import pytest


@pytest.fixture(scope="session")
def engine():
    time.sleep(0.4)
    return "engine"
""",
    "test_a.py": """
import time


def test_uses_the_engine(engine):
    time.sleep(0.2)


def test_quick():
    pass
""",
    "sub/test_b.py": """
def test_also_uses_the_engine(engine):
    pass
""",
}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_the_summary_and_the_json_say_where_the_time_went(tmp_path: Path, workers: list[str]) -> None:
    for name, text in SUITE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    report = tmp_path / "durations.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "devtools.pytest_durations", f"--durations-json={report}", *workers],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "where the time goes (devtools.pytest_durations)" in done.stdout
    figures = json.loads(report.read_text())
    assert figures["by_file"]["test_a.py"]["tests"] == 2
    assert figures["by_file"]["test_a.py"]["call_s"] >= 0.2
    assert figures["by_folder"]["sub"]["tests"] == 1
    engine = figures["fixtures"]["engine"]
    # Once per process that needed it: one without xdist; one or two (a session per worker) with it.
    assert engine["scope"] == "session" and engine["count"] >= 1 and engine["seconds"] >= 0.4, engine
    assert figures["tests"][0]["nodeid"] == "test_a.py::test_uses_the_engine"
