"""``fleetctl traffic export``: a variant's own ``Invocations`` from the emulator's CloudWatch, as the CSV the
simulator replays, with the calendar table's entries beside it.

Two sources of traffic: three weeks put into CloudWatch as SageMaker would have published them (weeks cannot be
replayed here; ``put_invocations``), and requests sent to the emulated endpoint now, whose ``Invocations`` the
emulated runtime publishes itself. Everything after (GetMetricData, the reconciler's reader, the CSV, the replay)
is the project's own code through the CLI.
"""

from __future__ import annotations

import csv
import json
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from devtools import operator_stack
from fleetctl.cli import main
from fleetctl.errors import ExitCode
from fleetsim.traffic import load_csv
from tests.integration.fleetctl.conftest import NOW_TIME, check_schema, put_invocations
from tests.integration.fleetctl.test_calendar import ONE_PIECE
from tests.integration.fleetctl.test_plan_forecast import EVERYDAY_RPS, friday_nights


def rows(path: Path) -> list[tuple[str, int]]:
    with path.open(encoding="utf-8") as handle:
        reader = csv.reader(handle)
        assert next(reader) == ["time", "requests"]
        return [(at, int(count)) for at, count in reader]


def test_three_weeks_export_with_the_calendar_and_replay_with_the_command_it_prints(
    stack: Any, cli: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put_invocations(days=21, rps=friday_nights(3 * EVERYDAY_RPS))
    in_the_judged_week = [a if a != "2026-12-04T20:00" else "2026-11-26T20:00" for a in ONE_PIECE]
    assert cli(*in_the_judged_week).code == 0
    path = tmp_path / "prod.csv"

    shown = cli("--json", "traffic", "export", operator_stack.ENDPOINT, "--days", "21", "--output", str(path))

    assert shown.code == ExitCode.OK, shown.err
    report = shown.json()
    check_schema(report, "traffic_export")
    written = rows(path)
    assert len(written) == report["rows"] == 21 * 288
    assert written[0] == ("2026-11-10T00:00:00Z", round(EVERYDAY_RPS * 300))
    friday_night = dict(written)["2026-11-27T11:00:00Z"]  # a Friday simulpub: three times the everyday traffic
    assert friday_night == 3 * round(EVERYDAY_RPS * 300)
    assert report["requests"] == sum(count for _, count in written)
    assert (report["periods_without_requests"], report["judge_from"]) == (0, "2026-11-24T00:00:00Z")
    calendar = Path(report["calendar_path"])
    assert calendar == tmp_path / "prod.calendar.yaml" and report["calendar_entries"] == 1
    assert "One Piece ch. 1100" in calendar.read_text()
    shown = cli("traffic", "export", operator_stack.ENDPOINT, "--days", "21", "--output", str(path))
    for_people = " ".join(shown.out.split())  # as wrapped for the terminal, unwrapped
    assert "6048 five-minute rows from 2026-11-10 00:00 to 2026-12-01 00:00 UTC" in for_people
    assert "the replay judges the last week, from 2026-11-24 00:00 UTC, on the weeks before it" in for_people
    assert f"replay: {report['replay']}" in for_people
    # The simulator reads back what was written: the same minutes, the same requests.
    trace = load_csv(path)
    assert (trace.start, sum(trace.requests)) == (NOW_TIME - timedelta(days=21), report["requests"])

    # The command the export printed replays it: the last week judged on the two before, the release planned for.
    capsys.readouterr()
    replay = shlex.split(report["replay"])
    assert replay[:2] == ["fleetctl", "simulate"] and "--calendar" in replay
    code = main([*replay[1:], "--policies", "project", "--json"])
    replayed = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (replayed["judged_from"], replayed["minutes"]) == ("2026-11-24T00:00:00+00:00", 21 * 1440)
    windows = {w["name"] for w in replayed["windows"]}
    assert {"One Piece ch. 1100", "friday-simulpub"} <= windows  # the table's release and fleet.yaml's recurring one
    assert replayed["policies"]["project"]["failed_pct"] == 0


def test_what_the_endpoint_served_now_is_exported_with_the_quiet_periods_after_it(
    stack: Any, cli: Any, tmp_path: Path
) -> None:
    """Requests sent to the emulated endpoint: the runtime publishes their Invocations, the export reads them."""
    runtime = boto3.client("sagemaker-runtime")
    for _ in range(7):
        runtime.invoke_endpoint(
            EndpointName=operator_stack.ENDPOINT, Body=b'{"messages": []}', ContentType="application/json"
        )
    path = tmp_path / "now.csv"
    later = f"{datetime.now(UTC) + timedelta(minutes=20):%Y-%m-%dT%H:%M:%SZ}"  # their periods have ended by then

    from_cli = main(
        ["--now", later, "--json", "traffic", "export", operator_stack.ENDPOINT, "--days", "1", "--output", str(path)]
    )

    assert from_cli == ExitCode.OK
    written = rows(path)
    assert sum(count for _, count in written) == 7
    assert written[0][1] == 7 or written[0][1] + written[1][1] == 7  # the requests fell in one or two periods
    assert all(count == 0 for _, count in written[2:])  # the quiet periods after them, as the reconciler reads them
    assert 3 <= len(written) <= 5


def test_an_endpoint_without_traffic_or_not_in_fleet_yaml_is_refused_and_nothing_is_written(
    stack: Any, cli: Any, tmp_path: Path
) -> None:
    path = tmp_path / "none.csv"

    quiet = cli("traffic", "export", operator_stack.ENDPOINT, "--output", str(path))
    unknown = cli("traffic", "export", "manga-chat-staging", "--output", str(path))
    too_far = cli("traffic", "export", operator_stack.ENDPOINT, "--days", "90", "--output", str(path))

    assert quiet.code == ExitCode.NOT_FOUND
    assert f"no Invocations of {operator_stack.ENDPOINT}/primary in CloudWatch over the last 28 days" in quiet.err
    assert unknown.code == ExitCode.USAGE and "is not in fleet.yaml: which variant?" in unknown.err
    assert "pass --variant" in unknown.err
    assert too_far.code == ExitCode.USAGE and "CloudWatch keeps five-minute datapoints for 63 days" in too_far.err
    assert not path.exists()
