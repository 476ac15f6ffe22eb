"""The locks: what the layer bundles and the image installs is what their ``requirements.in`` ask for, pinned with
hashes, at the versions the tests run with.

``requirements.in`` (the layer's in ``layers/core``, the image's in ``gpu_container``) is edited by hand;
``make lock`` writes ``requirements.txt`` (pinned and hashed: sam build bundles the layer's, the Dockerfile installs
the image's) and ``constraints.txt`` (the same pins without hashes: what the test environments install). A pin
changed in ``requirements.in`` without ``make lock`` fails here.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from devtools.check_build import locked_versions, normalize

REPO = Path(__file__).resolve().parents[2]
LOCKED = [REPO / "layers" / "core", REPO / "gpu_container"]


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


@pytest.fixture(params=LOCKED, ids=lambda folder: folder.name)
def folder(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


def test_every_requirement_is_met_by_the_lock(folder: Path) -> None:
    wanted = _requirements((folder / "requirements.in").read_text())
    locked = locked_versions((folder / "requirements.txt").read_text())

    assert wanted and _unsatisfied(wanted, locked) == [], "run `make lock` after editing requirements.in"


def test_a_pin_changed_without_a_new_lock_is_caught() -> None:
    locked = locked_versions((REPO / "layers" / "core" / "requirements.txt").read_text())
    bumped = [Requirement("aws-lambda-powertools[tracer]==99.0.0"), Requirement("tenacity>=9")]

    was = locked["aws-lambda-powertools"]
    assert _unsatisfied(bumped, locked) == [f"aws-lambda-powertools[tracer]==99.0.0 (locked: {was})"]


def test_every_locked_package_carries_its_hashes(folder: Path) -> None:
    text = (folder / "requirements.txt").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text)  # one entry per package: its pin, hashes and comments

    unhashed = [entry.split()[0] for entry in entries if "==" in entry and "--hash=sha256:" not in entry]
    assert unhashed == []


def test_the_constraints_pin_what_the_lock_pins(folder: Path) -> None:
    assert locked_versions((folder / "constraints.txt").read_text()) == locked_versions(
        (folder / "requirements.txt").read_text()
    )


def test_the_layer_and_the_image_agree_on_the_packages_they_share() -> None:
    layer, image = (locked_versions((f / "constraints.txt").read_text()) for f in LOCKED)

    assert {n: (v, image[n]) for n, v in layer.items() if n in image and image[n] != v} == {}


def test_the_tests_run_with_the_locked_versions(folder: Path) -> None:
    here = [r for r in _requirements((folder / "constraints.txt").read_text()) if not r.marker or r.marker.evaluate()]
    locked = {normalize(r.name): str(r.specifier).removeprefix("==") for r in here}
    installed = {name: metadata.version(name) for name in locked}

    assert installed == locked, "reinstall: `make install` installs the locks' versions (constraints.txt)"
