"""A time budget per test that stays: a test whose call takes longer than the limit fails, unless marked slow.

Loaded by ``tests/conftest.py``. The limit is the ini option ``call_budget_s`` (60 s in ``pyproject.toml``;
``-o call_budget_s=N`` changes it for one run, ``0`` switches the check off). A test that needs longer says so,
with the reason a reader needs to judge it::

    @pytest.mark.slow(reason="starts two CPU vLLM engines behind the emulated endpoint")
    def test_...

Only the call phase is measured: a shared fixture (an engine started once per session) is set-up time, charged
to whichever test needs it first, and is measured by ``make test-durations`` instead. A ``slow`` mark without a
reason fails the test, so the budget cannot be waived silently.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

DEFAULT_BUDGET_S = 60.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "call_budget_s",
        "seconds a test's call may take unless it is marked @pytest.mark.slow(reason=...); 0 switches the check off",
        default=str(DEFAULT_BUDGET_S),
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow(reason): this test's call may take longer than call_budget_s; the reason says why it must",
    )


def budget_s(config: pytest.Config) -> float:
    """The configured limit in seconds (0: no limit)."""
    return float(str(config.getini("call_budget_s")))


def _slow_reason(item: pytest.Item) -> str | None:
    """The slow mark's reason; ``""`` when the mark has none, ``None`` when the test is not marked slow."""
    mark = item.get_closest_marker("slow")
    if mark is None:
        return None
    reason = mark.kwargs.get("reason", mark.args[0] if mark.args else "")
    return str(reason).strip()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    if report.when != "call" or not report.passed:
        return report
    reason = _slow_reason(item)
    if reason == "":
        report.outcome = "failed"
        report.longrepr = "@pytest.mark.slow needs a reason: @pytest.mark.slow(reason='why this test must take long')"
        return report
    limit = budget_s(item.config)
    if reason is None and limit > 0 and report.duration > limit:
        report.outcome = "failed"
        report.longrepr = (
            f"this test took {report.duration:.1f} s, over the {limit:g} s budget per test (call_budget_s). "
            "Share the expensive set-up (a session or module fixture), or mark it "
            "@pytest.mark.slow(reason='...') saying why it must take this long."
        )
    return report
