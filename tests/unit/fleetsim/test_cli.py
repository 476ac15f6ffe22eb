"""``python -m fleetsim`` as an operator runs it: a planned release, a replayed export, and every bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no types-jsonschema in the dev environment
import pytest

from fleetsim.__main__ import main
from fleetsim.report import Summary

RELEASE = """\
- name: One Piece ch. 1100
  start: "2026-12-03T20:00"
  timezone: Asia/Tokyo
  duration_minutes: 180
  multiplier: 3
  reason: One Piece chapter 1100 release
"""

SUMMARY_SCHEMA = {
    "type": "object",
    "required": list(Summary.__dataclass_fields__),
    "properties": {
        "failed": {"type": "integer", "minimum": 0},
        "failed_pct": {"type": "number", "minimum": 0, "maximum": 100},
        "instance_hours": {"type": "number", "exclusiveMinimum": 0},
        "spike_to_capacity_s": {"type": ["number", "null"]},
        "cost_usd": {"type": ["number", "null"]},
    },
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["endpoint", "variant", "start", "minutes", "windows", "policies", "plot"],
    "properties": {
        "minutes": {"type": "integer"},
        "windows": {
            "type": "array",
            "items": {"type": "object", "required": ["name", "start", "end", "predicted"]},
        },
        "policies": {
            "type": "object",
            "required": ["reactive", "project", "oracle"],
            "additionalProperties": SUMMARY_SCHEMA,
        },
    },
}


@pytest.fixture
def release(tmp_path: Path) -> Path:
    path = tmp_path / "release.yaml"
    path.write_text(RELEASE)
    return path


def test_will_we_cope_with_a_planned_release_and_what_will_it_cost(
    release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "thursday.png"
    code = main(["--from", "2026-12-03T12:00", "--days", "0.5", "--calendar", str(release), "--plot", str(plot)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "calendar    Thu 12-03 11:00 UTC  x3  One Piece ch. 1100" in out.out
    rows = {line.split()[0]: line.split() for line in out.out.splitlines() if line.split()[:1] in (["reactive"],
            ["project"], ["oracle"])}  # fmt: skip
    assert set(rows) == {"reactive", "project", "oracle"}
    assert rows["project"][3] == "0.000"  # failed % on calendar events: the release was pre-scaled
    assert rows["oracle"][-1] == "x1.000"
    assert f"plot: {plot}" in out.out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "simulating project" in out.err  # progress goes to stderr


def test_json_output_for_scripts(release: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--from", "2026-12-03T18:00", "--days", "0.25", "--calendar", str(release), "--json",
                 "--spike", "2026-12-03T21:30,30,2"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0 and out.err == ""
    result = json.loads(out.out)
    jsonschema.validate(result, OUTPUT_SCHEMA)
    assert [(w["name"], w["predicted"]) for w in result["windows"]] == [
        ("One Piece ch. 1100", True),
        ("unpredicted spike", False),
    ]
    assert result["policies"]["oracle"]["failed"] == 0


def test_a_yearly_entry_is_played_and_pre_scaled_like_a_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spring = tmp_path / "spring.yaml"
    spring.write_text(
        '- kind: yearly\n  name: Spring anime announcements\n  month: 4\n  day: 1\n  local_time: "10:00"\n'
        '  end: "14:00"\n  timezone: Asia/Tokyo\n  multiplier: 2.5\n'
    )
    code = main(["--from", "2027-04-01T06:00", "--days", "0.5", "--calendar", str(spring), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(w["name"], w["start"], w["predicted"]) for w in result["windows"]] == [
        ("Spring anime announcements", "2027-04-01T01:00:00+00:00", True)  # 10:00 JST
    ]
    policies = result["policies"]
    assert policies["project"]["failed_on_calendar_events"] == 0  # raised lead time before, as a release would be
    assert policies["project"]["minutes_degraded"] == 0
    # The day does need the capacity: target tracking alone gets there, but people queue for it meanwhile.
    assert policies["reactive"]["minutes_degraded"] > 0


def test_an_exported_trace_is_replayed_with_the_calendar_events_it_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "invocations.csv"
    rows = [f"2026-12-04T{10 + m // 60}:{m % 60:02d}:00Z,{720 if m < 60 else 1800}" for m in range(30, 90)]
    trace.write_text("Timestamp,Invocations\n" + "\n".join(rows) + "\n")
    code = main(["--trace", str(trace), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["minutes"] == 60 and result["start"] == "2026-12-04T10:30:00+00:00"
    assert [w["name"] for w in result["windows"]] == ["friday-simulpub"]  # Friday 20:00 JST = 11:00Z


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--from", "2026-12-03", "--endpoint", "manga-chat-staging"],
         "endpoint 'manga-chat-staging' is not in"),
        (["--from", "2026-12-03", "--timezone", "Mars/Olympus"], "--timezone: unknown time zone 'Mars/Olympus'"),
        (["--from", "next friday"], "--from: cannot read 'next friday'"),
        (["--from", "2026-12-03", "--spike", "2026-12-03T13:00,90"], "expected START,MINUTES,MULTIPLIER"),
        (["--from", "2026-12-03", "--days", "0"], "--days 0: give between a minute and a year"),
        (["--from", "2026-12-03", "--policies", "reactive,magic"], "--policies: unknown ['magic']"),
        (["--from", "2026-12-03", "--provisioning-minutes", "8-5"], "expected 0 <= LOW <= HIGH"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_with_what_to_write_instead(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fleetsim: ") and says in err


def test_an_invalid_extra_calendar_entry_is_named_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "release.yaml"
    bad.write_text(RELEASE.replace("Asia/Tokyo", "Asia/Osaka"))
    assert main(["--from", "2026-12-03", "--calendar", str(bad)]) == 2
    assert "One Piece ch. 1100: timezone: Value error, unknown time zone 'Asia/Osaka'" in capsys.readouterr().err
    bad.write_text("name: not a list\n")
    assert main(["--from", "2026-12-03", "--calendar", str(bad)]) == 2
    assert "must be a YAML list of calendar entries" in capsys.readouterr().err


def test_a_bad_trace_file_exits_with_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("2026-12-04T10:00:00Z,5\n2026-12-04T10:01:00Z,five\n")
    assert main(["--trace", str(trace)]) == 2
    assert f"{trace}:2: the request count 'five' is not a number" in capsys.readouterr().err


def test_without_traffic_argparse_says_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "one of the arguments --from --trace --scenario is required" in capsys.readouterr().err


def test_a_scenario_is_played_for_weeks_and_judged_on_its_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "unannounced.csv"
    code = main(["--scenario", "unannounced-3x", "--policies", "reactive,oracle", "--json", "--save-trace", str(saved)])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    jsonschema.validate(result, {**OUTPUT_SCHEMA, "properties": {**OUTPUT_SCHEMA["properties"], "policies": {}}})
    assert (result["minutes"], result["judged_from"]) == (4 * 7 * 1440, "2026-11-29T15:00:00+00:00")  # Monday JST
    assert [(w["name"], w["predicted"]) for w in result["windows"]][:2] == [
        ("shonen-jump-monday", True),
        ("unannounced 3x at night", False),
    ]
    reactive = result["policies"]["reactive"]
    assert reactive["requests"] < sum(int(line.split(",")[1]) for line in saved.read_text().splitlines()[1:]) / 3
    assert reactive["spike_to_first_capacity_request_s"] is not None
    # The saved trace replays through --trace with the calendar's own windows (not the spike: it is in none).
    assert main(["--trace", str(saved), "--policies", "oracle", "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["minutes"] == result["minutes"] and replayed["judged_from"] is None
    assert "unannounced 3x" not in {w["name"] for w in replayed["windows"]}


def test_the_scenarios_are_listed_and_an_unknown_one_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-scenarios"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"baseline-1x", "event-early-30pct", "entry-brings-nothing", "unannounced-3x"} <= set(listed)
    assert main(["--scenario", "calm-sea"]) == 2
    assert "fleetsim: --scenario: unknown scenario 'calm-sea'; known: baseline-0.5x" in capsys.readouterr().err
    assert main(["--scenario", "baseline-1x", "--spike", "2026-11-10T13:00,60,3"]) == 2
    assert (
        "--spike: baseline-1x: spike at 2026-11-10T13:00:00+09:00 is not in the judged week" in capsys.readouterr().err
    )
