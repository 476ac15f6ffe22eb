"""Where the test suite's time goes: a pytest plugin that sums durations by folder, file and fixture set-up.

``make test-durations`` loads it (``pytest -p devtools.pytest_durations``). pytest's own ``--durations`` lists the
slowest set-up, call and teardown phases one test at a time; a session fixture's set-up (an engine, a moto
server) is charged to whichever test happened to need it first. This plugin also times every fixture's set-up
(``pytest_fixture_setup``) and prints, at the end of the run:

- per folder (``tests/integration/workflows``) and per file: tests, set-up, call and teardown seconds;
- per fixture: how often it was set up, its scope and the seconds spent setting it up;
- the wall time of the whole run.

It works under pytest-xdist too: the workers time the fixtures and send them with each test's report
(``user_properties``); the controller adds them up. ``--durations-json=PATH`` also writes the raw figures.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

#: The name under which a test's fixture set-up times travel in its report's ``user_properties``.
FIXTURE_PROPERTY = "fixture_setup_s"
#: Rows printed per table.
TOP = 25


@dataclass
class PhaseTotals:
    """Seconds per phase for a group of tests (a folder, a file)."""

    tests: int = 0
    setup: float = 0.0
    call: float = 0.0
    teardown: float = 0.0

    @property
    def total(self) -> float:
        return self.setup + self.call + self.teardown


@dataclass
class FixtureTotals:
    """How often a fixture was set up and how long that took, all set-ups together."""

    scope: str = ""
    count: int = 0
    seconds: float = 0.0
    slowest_for: str = ""
    slowest: float = 0.0


@dataclass
class Recorder:
    """The controller's running sums (or the only process's, without xdist)."""

    started: float = field(default_factory=time.perf_counter)
    by_file: dict[str, PhaseTotals] = field(default_factory=lambda: defaultdict(PhaseTotals))
    fixtures: dict[str, FixtureTotals] = field(default_factory=lambda: defaultdict(FixtureTotals))
    tests: list[dict[str, Any]] = field(default_factory=list)

    def add(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        totals = self.by_file[path]
        if report.when == "setup":
            totals.tests += 1
            totals.setup += report.duration
            for key, value in report.user_properties:
                if key == FIXTURE_PROPERTY:
                    for name, scope, seconds in cast("list[tuple[str, str, float]]", value):
                        self._fixture(name, scope, seconds, report.nodeid)
        elif report.when == "call":
            totals.call += report.duration
            self.tests.append({"nodeid": report.nodeid, "call_s": round(report.duration, 3)})
        else:
            totals.teardown += report.duration

    def _fixture(self, name: str, scope: str, seconds: float, nodeid: str) -> None:
        fixture = self.fixtures[name]
        fixture.scope = scope
        fixture.count += 1
        fixture.seconds += seconds
        if seconds > fixture.slowest:
            fixture.slowest, fixture.slowest_for = seconds, nodeid

    def by_folder(self) -> dict[str, PhaseTotals]:
        folders: dict[str, PhaseTotals] = defaultdict(PhaseTotals)
        for path, totals in self.by_file.items():
            into = folders[str(Path(path).parent)]
            into.tests += totals.tests
            into.setup += totals.setup
            into.call += totals.call
            into.teardown += totals.teardown
        return folders


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--durations-json", default=None, help="also write the summed durations to this JSON file")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_RECORDER] = Recorder()


_RECORDER = pytest.StashKey[Recorder]()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Generator[None]:
    started = time.perf_counter()
    try:
        return (yield)
    finally:
        seconds = time.perf_counter() - started
        item = getattr(request, "_pyfuncitem", None)
        if item is not None and seconds >= 0.001:
            recorded = _fixture_list(item)
            recorded.append((fixturedef.argname, fixturedef.scope, round(seconds, 4)))


def _fixture_list(item: pytest.Item) -> list[tuple[str, str, float]]:
    for key, value in item.user_properties:
        if key == FIXTURE_PROPERTY:
            return cast("list[tuple[str, str, float]]", value)
    made: list[tuple[str, str, float]] = []
    item.user_properties.append((FIXTURE_PROPERTY, made))
    return made


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Runs in the controller for every report a worker sends, and in the only process without xdist.
    config = _CONFIG.get("config")
    if config is not None and not hasattr(config, "workerinput"):
        config.stash[_RECORDER].add(report)


_CONFIG: dict[str, pytest.Config] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    recorder = config.stash[_RECORDER]
    wall = time.perf_counter() - recorder.started
    write = terminalreporter.write_line
    terminalreporter.section("where the time goes (devtools.pytest_durations)")
    write(f"wall time {wall:.1f} s; test phases summed {sum(t.total for t in recorder.by_file.values()):.1f} s")
    _table(write, "by folder", recorder.by_folder())
    _table(write, f"by file (top {TOP})", recorder.by_file)
    write("")
    write(f"fixture set-up (top {TOP} by seconds, all set-ups summed)")
    write(f"{'seconds':>9} {'count':>6} {'scope':<9} {'slowest':>8}  fixture (slowest set-up for)")
    for name, fixture in sorted(recorder.fixtures.items(), key=lambda kv: -kv[1].seconds)[:TOP]:
        write(
            f"{fixture.seconds:9.1f} {fixture.count:6d} {fixture.scope:<9} {fixture.slowest:8.1f}  "
            f"{name} ({fixture.slowest_for})"
        )
    path = config.getoption("--durations-json")
    if path:
        Path(path).write_text(json.dumps(_as_json(recorder, wall), indent=1))
        write(f"figures written to {path}")


def _table(write: Any, title: str, rows: dict[str, PhaseTotals]) -> None:
    write("")
    write(title)
    write(f"{'total s':>9} {'setup':>8} {'call':>8} {'teardown':>8} {'tests':>6}  path")
    for path, totals in sorted(rows.items(), key=lambda kv: -kv[1].total)[:TOP]:
        write(
            f"{totals.total:9.1f} {totals.setup:8.1f} {totals.call:8.1f} {totals.teardown:8.1f} "
            f"{totals.tests:6d}  {path}"
        )


def _as_json(recorder: Recorder, wall: float) -> dict[str, Any]:
    def phases(rows: dict[str, PhaseTotals]) -> dict[str, Any]:
        return {
            path: {"tests": t.tests, "setup_s": t.setup, "call_s": t.call, "teardown_s": t.teardown}
            for path, t in sorted(rows.items())
        }

    return {
        "wall_s": wall,
        "by_folder": phases(recorder.by_folder()),
        "by_file": phases(recorder.by_file),
        "fixtures": {
            name: {"scope": f.scope, "count": f.count, "seconds": f.seconds, "slowest_for": f.slowest_for}
            for name, f in sorted(recorder.fixtures.items())
        },
        "tests": sorted(recorder.tests, key=lambda t: -float(t["call_s"])),
    }
