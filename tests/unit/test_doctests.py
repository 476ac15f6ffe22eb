"""The examples in the docstrings of the control plane and of the GPU container's gateway are run.

So they cannot drift from the code. Every example runs: one that could only show an AWS call is a
plain code block instead, never a skipped example.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import fleetops
import gateway

MODULES = sorted(
    module.name
    for package in (fleetops, gateway)
    for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


@pytest.mark.parametrize("name", MODULES)
def test_no_example_is_skipped(name: str) -> None:
    tests = doctest.DocTestFinder().find(importlib.import_module(name))
    skipped = [f"{t.name}:{e.lineno}" for t in tests for e in t.examples if e.options.get(doctest.SKIP)]
    assert not skipped, f"skipped docstring examples in {name}: {skipped}"
