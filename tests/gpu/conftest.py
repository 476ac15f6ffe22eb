"""GPU tests: they read real NVML values, so they only run where an NVIDIA GPU and driver are present.

Without one (this project's build machines and CI) every test in this folder is skipped with the reason
NVML gave; that is the only skip the project accepts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _nvml_unavailable() -> str | None:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"no NVIDIA GPU here (pynvml.nvmlInit failed: {exc})"
    pynvml.nvmlShutdown()
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if HERE in Path(str(item.path)).parents]
    if not mine:
        return
    reason = _nvml_unavailable()
    for item in mine:
        item.add_marker(pytest.mark.gpu)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
