"""Integration tests: AWS emulated by one moto server over HTTP, started once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devtools.emulator import MotoServer, moto_server


@pytest.fixture(scope="session")
def emulator() -> Iterator[MotoServer]:
    with moto_server() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_emulator(emulator: MotoServer) -> Iterator[MotoServer]:
    """Every test starts from an empty account."""
    emulator.reset()
    yield emulator
