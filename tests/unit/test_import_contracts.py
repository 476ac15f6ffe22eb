"""The architecture contracts in pyproject.toml ([tool.importlinter]) hold, and they would catch a breach.

The pure core (models, parsing, decisions) must not reach AWS: a domain module that imports boto3 or an
adapter breaks the first contract. The second test plants exactly that breach in a copy of the tree, so
the check is known to be able to fail.
"""

from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import fleetops

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'layers' / 'core'}{os.pathsep}{tree / 'gpu_container'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_tree_keeps_every_contract() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_control_plane_module_is_placed_as_pure_core_or_as_an_adapter() -> None:
    # A new module the contract does not name would escape it: each one must be put on one side.
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    core = next(c for c in contracts if c["name"].startswith("The control plane's pure core"))
    placed = set(core["source_modules"]) | set(core["forbidden_modules"])
    modules = {m.name for m in pkgutil.walk_packages(fleetops.__path__, "fleetops.") if not m.ispkg}
    unplaced = {m for m in modules if m not in placed and not m.startswith("fleetops.aws.")}
    assert not unplaced, f"add these to the pure-core or the adapter list in pyproject.toml: {sorted(unplaced)}"


def _copy_tree(tmp_path: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "layers" / "core" / "fleetops", tmp_path / "layers" / "core" / "fleetops", ignore=ignore)
    shutil.copytree(ROOT / "gpu_container" / "gateway", tmp_path / "gpu_container" / "gateway", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_a_domain_module_that_imports_an_adapter_breaks_the_contract(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path)
    planner = tree / "layers" / "core" / "fleetops" / "prescale" / "planner.py"
    planner.write_text(planner.read_text() + "\nfrom fleetops.aws.autoscaling import AutoScaling  # noqa\n")

    result = _lint_imports(tree)

    assert result.returncode == 1
    assert "fleetops.prescale.planner is not allowed to import fleetops.aws" in result.stdout


def test_the_gateway_prompt_budget_that_imports_http_breaks_the_contract(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path)
    prompt = tree / "gpu_container" / "gateway" / "prompt.py"
    prompt.write_text(prompt.read_text() + "\nimport starlette.responses  # noqa\n")

    result = _lint_imports(tree)

    assert result.returncode == 1
    assert "gateway.prompt is not allowed to import starlette" in result.stdout
