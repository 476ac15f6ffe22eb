"""The operator's command line installs alone: `pip install .` into a fresh environment, without torch or vLLM.

What pyproject.toml declares is all the installed `fleetctl` gets (no development environment, no checkout on its
path), as with `pipx install .` on an operator's laptop.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
#: What the wheel is built from (copied, so that building leaves nothing in the checkout).
SOURCES = (
    "pyproject.toml", "fleetctl", "fleetsim", "devtools", "layers/core/fleetops", "layers/core/fleet_config", "clients",
)  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-install")
    source = root / "source"
    for part in SOURCES:
        copy = shutil.copytree if (REPO / part).is_dir() else shutil.copy2
        (source / part).parent.mkdir(parents=True, exist_ok=True)
        copy(REPO / part, source / part)
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, str(source)], check=True, timeout=600)
    return env_dir / "bin"


def _run(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "FLEETCTL_STACK": ""}
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True, env=env, cwd="/", timeout=120, check=False
    )


def test_the_installed_fleetctl_answers_help_and_version_without_torch_or_vllm(installed: Path) -> None:
    helped = _run(installed, "fleetctl", "--help")
    versioned = _run(installed, "fleetctl", "--version")
    find = "import importlib.util as u; print(u.find_spec('torch'), u.find_spec('vllm'))"
    heavy = _run(installed, "python", "-c", find)

    assert helped.returncode == 0 and "plan" in helped.stdout and "rollout" in helped.stdout, helped.stderr
    assert versioned.returncode == 0 and versioned.stdout.strip().startswith("fleetctl 0."), versioned
    assert heavy.stdout.strip() == "None None", "the CLI's install pulled in torch or vLLM"


def test_the_installed_fleetctl_validates_input_before_any_aws_call(installed: Path) -> None:
    refused = _run(installed, "fleetctl", "--json", "--stack", "s", "plan", "--at", "not-a-time")

    assert refused.returncode == 2, refused
    error = json.loads(refused.stderr)  # errors go to stderr, in JSON with --json
    assert "--at" in error["error"] and error["exit_code"] == 2, error


def test_the_installed_fleetctl_prints_completion_for_bash(installed: Path) -> None:
    script = _run(installed, "fleetctl", "completion", "bash")

    assert script.returncode == 0 and "complete" in script.stdout and "kill-switch" in script.stdout


def test_the_installed_packages_import_what_the_commands_need(installed: Path) -> None:
    # Every command's modules, imported in the CLI's own environment (a missing dependency fails here).
    modules = ["fleetctl.commands", "fleetctl.status", "fleetctl.planning", "fleetctl.rollouts", "fleetctl.why"]
    probe = _run(installed, "python", "-c", f"import importlib; [importlib.import_module(m) for m in {modules!r}]")

    assert probe.returncode == 0, probe.stderr[-2000:]


def test_the_chat_backends_fallback_helper_installs_with_it_without_the_gateway(installed: Path) -> None:
    find = "import clients.fallback_client, importlib.util as u; print(u.find_spec('gateway'))"
    probe = _run(installed, "python", "-c", find)

    assert (probe.returncode, probe.stdout.strip()) == (0, "None"), probe.stderr[-2000:]


def test_the_installed_fleetctl_simulates_from_the_deployed_template_and_says_when_it_has_none(installed: Path) -> None:
    # No checkout beside an installed CLI: the simulator needs the stack's template, and says how to give it.
    args = ("fleetctl", "simulate", "--from", "2026-11-30", "--days", "0.25", "--policies", "project", "--json")
    missing = _run(installed, *args)
    given = _run(installed, *args, "--template", str(REPO / "template.yaml"))

    assert missing.returncode == 2 and "pass --template with the path of the stack's template.yaml" in missing.stderr
    assert given.returncode == 0, given.stderr[-2000:]
    assert "project" in json.loads(given.stdout)["policies"]
