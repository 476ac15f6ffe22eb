"""The shared layer's lock: what ``sam build`` bundles is what ``requirements.in`` asks for and what the tests run.

``layers/core/requirements.in`` is edited by hand; ``make lock`` writes ``requirements.txt`` (pinned, hashed; the
layer's build) and ``constraints.txt`` (the same pins without hashes; the test environments' installs). A pin
changed in ``requirements.in`` without ``make lock`` fails here.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from devtools.check_build import locked_versions, normalize

LAYER = Path(__file__).resolve().parents[2] / "layers" / "core"


def _requirements(text: str) -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line and not line.startswith("-")]


def _unsatisfied(wanted: list[Requirement], locked: dict[str, str]) -> list[str]:
    missing = []
    for req in wanted:
        version = locked.get(normalize(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            missing.append(f"{req} (locked: {version or 'absent'})")
    return missing


def test_every_requirement_is_met_by_the_lock() -> None:
    wanted = _requirements((LAYER / "requirements.in").read_text())
    locked = locked_versions((LAYER / "requirements.txt").read_text())

    assert wanted and _unsatisfied(wanted, locked) == [], "run `make lock` after editing requirements.in"


def test_a_pin_changed_without_a_new_lock_is_caught() -> None:
    locked = locked_versions((LAYER / "requirements.txt").read_text())
    bumped = [Requirement("aws-lambda-powertools[tracer]==99.0.0"), Requirement("tenacity>=9")]

    was = locked["aws-lambda-powertools"]
    assert _unsatisfied(bumped, locked) == [f"aws-lambda-powertools[tracer]==99.0.0 (locked: {was})"]


def test_every_locked_package_carries_its_hashes() -> None:
    text = (LAYER / "requirements.txt").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text)  # one entry per package: its pin, hashes and comments

    unhashed = [entry.split()[0] for entry in entries if "==" in entry and "--hash=sha256:" not in entry]
    assert unhashed == []


def test_the_constraints_pin_what_the_lock_pins() -> None:
    assert locked_versions((LAYER / "constraints.txt").read_text()) == locked_versions(
        (LAYER / "requirements.txt").read_text()
    )


def test_the_tests_run_with_the_locked_versions() -> None:
    locked = locked_versions((LAYER / "requirements.txt").read_text())
    installed = {name: metadata.version(name) for name in locked}

    assert installed == locked, "reinstall: `make install` installs the lock's versions (constraints.txt)"
