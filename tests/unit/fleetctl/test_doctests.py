"""The examples in fleetctl's docstrings run, so they cannot drift from the code."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import subprocess
import sys

import pytest

import fleetctl

MODULES = sorted(m.name for m in pkgutil.walk_packages(fleetctl.__path__, "fleetctl.") if m.name != "fleetctl.__main__")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_the_command_line_module_imports_neither_boto3_nor_rich() -> None:
    # `fleetctl --help` and every command start by importing fleetctl.cli: keep it to argparse.
    probe = "import sys, fleetctl.cli; print(sorted(m for m in ('boto3', 'rich', 'pydantic') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
