"""``fleetctl simulate`` is ``python -m fleetsim``: same arguments, same output, same exit codes (no AWS)."""

from __future__ import annotations

import json

import pytest

from fleetctl.cli import main


def test_simulate_runs_the_simulator_with_its_own_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--from", "2026-12-04", "--days", "0.25", "--policies", "reactive,project", "--json"])

    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["endpoint"] == "manga-chat-prod" and set(result["policies"]) == {"reactive", "project"}


def test_simulate_help_and_bad_input_are_the_simulators(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--help"]) == 0
    assert "usage: python -m fleetsim" in capsys.readouterr().out
    assert main(["simulate", "--from", "2026-12-04", "--timezone", "Mars/Base"]) == 2
    assert "--timezone: unknown time zone 'Mars/Base'" in capsys.readouterr().err
