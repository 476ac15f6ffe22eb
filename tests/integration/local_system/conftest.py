"""Local-system tests: the emulated AWS account with real containers behind its SageMaker endpoints.

Starting an endpoint starts real CPU vLLM engines (a minute or more), so a module deploys once and
its tests share the account: the emulator is reset once per module here, not before every test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.emulator import MotoServer
from devtools.local_sagemaker import LocalSageMaker, hosting
from devtools.tiny_model import TinyModel, ensure_tiny_model

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent


#: Files whose every test starts or replaces CPU vLLM engines in its call, with why it must take minutes.
SLOW = {
    "test_one_system.py": "each scenario deploys the whole system and rolls real containers (CPU vLLM engines)",
    "test_promotion_gates.py": "each candidate's gates start its own CPU vLLM engine and replay traffic through it",
}


#: Module-scoped deployments that several tests of a file share in turn. A file's tests that use one run after its
#: other tests, in file order: the fresh deployments of the others (function-scoped) must not start while the
#: shared one lives, as both would host the same endpoint on the same emulator.
SHARED_DEPLOYMENTS = {"shared_system"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        reason = SLOW.get(path.name) if path.parent == HERE else None
        if reason:
            item.add_marker(pytest.mark.slow(reason=reason))
    first_of_file: dict[Path, int] = {}
    for index, item in enumerate(items):
        first_of_file.setdefault(Path(str(item.path)), index)

    def shared_last(item: pytest.Item) -> tuple[int, bool]:
        shares = Path(str(item.path)).parent == HERE and bool(
            SHARED_DEPLOYMENTS & set(getattr(item, "fixturenames", ()))
        )
        return first_of_file[Path(str(item.path))], shares

    items[:] = sorted(items, key=shared_last)  # stable: every other test keeps its place


@pytest.fixture(autouse=True, scope="module")
def _fresh_emulator(emulator: MotoServer) -> Iterator[MotoServer]:
    """Every module starts from an empty account (overrides the per-test reset of tests/integration)."""
    emulator.reset()
    yield emulator


@pytest.fixture(scope="session")
def tiny_model() -> TinyModel:
    return ensure_tiny_model(REPO / ".cache" / "tiny-model")


@pytest.fixture(scope="module")
def local_sagemaker(emulator: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSageMaker]:
    """Endpoints of the project's image run real containers while the module runs (stopped after it)."""
    with hosting(tmp_path_factory.mktemp("local-sagemaker")) as host:
        yield host
