"""The emulated stack's outputs are exactly template.yaml's, and fleetctl reads only what the template declares."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import boto3

from devtools import operator_stack
from devtools.cfn_yaml import load
from fleetctl import stack as fleetctl_stack
from tests.conftest import REPO

TEMPLATE = load(REPO / "template.yaml")


def test_the_emulated_stack_declares_exactly_the_template_outputs(stack) -> None:
    described = boto3.client("cloudformation").describe_stacks(StackName=operator_stack.STACK)["Stacks"][0]

    assert {o["OutputKey"] for o in described["Outputs"]} == set(TEMPLATE["Outputs"])
    assert {p["ParameterKey"] for p in described["Parameters"]} == set(TEMPLATE["Parameters"])


def test_fleetctl_reads_only_outputs_and_parameters_the_template_declares() -> None:
    assert set(fleetctl_stack.OUTPUTS_READ) <= set(TEMPLATE["Outputs"])
    assert set(fleetctl_stack.PARAMETERS_READ) <= set(TEMPLATE["Parameters"])


def test_the_installed_command_answers_on_the_emulator(stack) -> None:
    # `make install` installs the project into .venv; the console script is fleetctl.cli:run.
    command = shutil.which("fleetctl", path=str(Path(sys.executable).parent))
    assert command, f"no fleetctl beside {sys.executable}: run make install"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package, not the checkout path
    done = subprocess.run(
        [command, "--stack", operator_stack.STACK, "--json", "kill-switch", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )

    assert done.returncode == 0, done.stderr
    assert '"engaged": false' in done.stdout
