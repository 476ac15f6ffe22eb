"""The examples in the start-up modules' docstrings are run, so they cannot drift from the code."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "name",
    [
        "gateway.config",
        "gateway.routing",
        "gateway.supervisor",
        "gateway.__main__",
        "gateway.errors",
        "gateway.openai_wire",
    ],
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)

    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
