"""``fleetctl calendar`` and ``plan`` on the emulated stack: the reconciler's validation and planning, no AWS JSON."""

from __future__ import annotations

import boto3
import pytest

from devtools import operator_stack
from fleetctl.errors import ExitCode
from fleetops.config import load_fleet_config
from fleetops.prescale.calendar_table import CalendarTable
from fleetops.prescale.reconciler import load_calendar
from tests.conftest import REPO
from tests.integration.fleetctl.conftest import check_schema, check_snapshot

FLEET = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
ONE_PIECE = [
    "calendar",
    "add",
    "--name",
    "One Piece ch. 1100",
    "--start",
    "2026-12-04T20:00",
    "--timezone",
    "Asia/Tokyo",
    "--duration",
    "180",
    "--multiplier",
    "3",
    "--reason",
    "One Piece chapter 1100 release",
]


def _reconciler_errors(row: dict[str, object]) -> list[str]:
    """What the reconciler says about a calendar-table row (its plan, log and metric carry these lines)."""
    _, invalid = load_calendar(FLEET.model_copy(update={"recurring": (), "off_peak": ()}), [row])
    return [e for bad in invalid for e in bad.errors]


def test_add_writes_the_row_the_readme_used_to_hand_write(stack, cli) -> None:
    added = cli(*ONE_PIECE)

    assert added.code == 0, added.err
    check_snapshot("calendar_add", added.out)
    rows = CalendarTable(stack.outputs["CalendarTableName"]).rows_by_id()
    assert rows == {
        "one-piece-ch-1100": {
            "name": "One Piece ch. 1100",
            "start": "2026-12-04T20:00",
            "timezone": "Asia/Tokyo",
            "duration_minutes": 180,
            "multiplier": 3,
            "reason": "One Piece chapter 1100 release",
        }
    }
    document = cli(*ONE_PIECE, "--id", "op-1100-jp", "--endpoint", operator_stack.ENDPOINT, "--json").json()
    check_schema(document, "calendar_change")
    assert document["entry"]["next_start"] == "2026-12-04T11:00:00Z"
    assert document["entry"]["endpoints"] == [operator_stack.ENDPOINT]


@pytest.mark.parametrize(
    ("flags", "row_change"),
    [
        (["--timezone", "Mars/Base"], {"timezone": "Mars/Base"}),
        (["--multiplier", "0"], {"multiplier": 0.0}),
        (["--endpoint", "manga-chat-staging"], {"endpoints": ["manga-chat-staging"]}),
        (["--start", "next friday"], {"start": "next friday"}),
    ],
)
def test_an_invalid_entry_is_refused_with_the_reconcilers_own_words(stack, cli, flags, row_change) -> None:
    row = {
        "name": "One Piece ch. 1100",
        "start": "2026-12-04T20:00",
        "timezone": "Asia/Tokyo",
        "multiplier": 3.0,
        "reason": "One Piece chapter 1100 release",
        "duration_minutes": 180,
    } | row_change
    expected = _reconciler_errors(row)
    assert expected  # the reconciler itself would skip this entry

    refused = cli(*ONE_PIECE, *flags)

    assert refused.code == ExitCode.USAGE
    for line in expected:
        assert line in refused.err
    assert "next: fix it and run the command again" in refused.err
    assert CalendarTable(stack.outputs["CalendarTableName"]).rows_by_id() == {}


def test_end_before_start_is_refused(stack, cli) -> None:
    flags = [f for f in ONE_PIECE if f not in ("--duration", "180")]
    refused = cli(*flags, "--end", "2026-12-04T19:00")

    assert refused.code == ExitCode.USAGE
    assert "end 2026-12-04T19:00:00 is not after start 2026-12-04T20:00:00" in refused.err


def test_a_yearly_entry_from_a_file_is_validated_and_written(stack, cli, tmp_path) -> None:
    spring = tmp_path / "spring.yaml"
    spring.write_text(
        "kind: yearly\nname: spring-anime-announcements\nmonth: 4\nday: 1\nlocal_time: '10:00'\nend: '14:00'\n"
        "timezone: Asia/Tokyo\nmultiplier: 2\nreason: spring anime season announcements\n"
    )

    added = cli("calendar", "add", "--file", str(spring), "--json")

    assert added.code == 0, added.err
    document = added.json()
    check_schema(document, "calendar_change")
    assert (document["event_id"], document["entry"]["kind"]) == ("spring-anime-announcements", "yearly")
    assert document["entry"]["next_start"] == "2027-04-01T01:00:00Z"  # 10:00 JST, the next 1 April after now
    rows = CalendarTable(stack.outputs["CalendarTableName"]).rows_by_id()
    assert rows["spring-anime-announcements"]["kind"] == "yearly"


def test_add_from_a_bad_file_or_with_too_few_flags_says_what_is_missing(stack, cli, tmp_path) -> None:
    # What the operator sees: the reconciler's own reason, the missing flags, or that the file is not an entry.
    autumn = tmp_path / "autumn.yaml"
    autumn.write_text("kind: seasonal\nname: autumn\n")
    unknown = cli("calendar", "add", "--file", str(autumn))
    assert unknown.code == ExitCode.USAGE
    assert "unknown kind 'seasonal'; valid kinds:" in unknown.err

    listed = tmp_path / "list.yaml"
    listed.write_text("- kind: yearly\n")
    assert "must hold one calendar entry (a mapping), got list" in cli("calendar", "add", "--file", str(listed)).err

    too_few = cli("calendar", "add", "--name", "One Piece ch. 1100", "--multiplier", "3")
    assert too_few.code == ExitCode.USAGE
    assert "a one-off release needs --start, --timezone, --duration or --end" in too_few.err
    both = cli(*ONE_PIECE, "--file", str(autumn))
    assert both.code == ExitCode.USAGE and "--file holds the whole entry" in both.err
    assert CalendarTable(stack.outputs["CalendarTableName"]).rows_by_id() == {}


def test_an_existing_id_needs_replace_and_remove_takes_it_out(stack, cli) -> None:
    assert cli(*ONE_PIECE).code == 0
    again = cli(*ONE_PIECE, "--multiplier", "4")
    assert again.code == ExitCode.CONFLICT and "--replace" in again.err

    replaced = cli(*ONE_PIECE, "--multiplier", "4", "--replace", "--json").json()
    assert (replaced["action"], replaced["entry"]["multiplier"]) == ("replaced", 4)

    removed = cli("calendar", "remove", "one-piece-ch-1100")
    assert removed.code == 0 and "removed one-piece-ch-1100" in removed.out
    assert CalendarTable(stack.outputs["CalendarTableName"]).rows_by_id() == {}
    missing = cli("calendar", "remove", "one-piece-ch-1100")
    assert missing.code == ExitCode.NOT_FOUND and "no calendar entry 'one-piece-ch-1100'" in missing.err


def test_list_shows_fleet_yaml_and_the_table_with_invalid_rows_and_why(stack, cli) -> None:
    assert cli(*ONE_PIECE).code == 0
    # A row written by hand, as the README once asked: the reconciler skips it, the list says why.
    CalendarTable(stack.outputs["CalendarTableName"]).put(
        "typo", {"name": "Typo", "start": "2026-12-05T20:00", "timezone": "Asia/Tokio", "multiplier": 2.0}
    )

    shown = cli("calendar", "list")

    assert shown.code == 0, shown.err
    check_snapshot("calendar_list", shown.out)
    document = cli("calendar", "list", "--json").json()
    check_schema(document, "calendar_list")
    by_name = {e["name"]: e for e in document["entries"]}
    assert by_name["shonen-jump-monday"]["source"] == "fleet.yaml" and by_name["shonen-jump-monday"]["valid"]
    assert by_name["Typo"]["valid"] is False
    assert by_name["Typo"]["errors"] == _reconciler_errors(
        {"name": "Typo", "start": "2026-12-05T20:00", "timezone": "Asia/Tokio", "multiplier": 2}
    )


def test_plan_at_a_time_is_a_dry_run_of_the_reconciler_shown_as_a_timeline(stack, cli) -> None:
    assert cli(*ONE_PIECE).code == 0

    shown = cli("plan", "--at", "2026-12-04T18:00", "--timezone", "Asia/Tokyo")

    assert shown.code == 0, shown.err
    check_snapshot("plan", shown.out)
    document = cli("plan", operator_stack.ENDPOINT, "--at", "2026-12-04T09:00Z", "--json").json()
    check_schema(document, "plan")
    [primary] = document["variants"]
    # At 18:00 JST the release is two hours away: its capacity comes the lead time (40 min) ahead ...
    assert primary["min_capacity_at"] == 4 and primary["timeline"][0]["at"] == "2026-12-04T10:20:00Z"
    assert primary["timeline"][0]["min_capacity"] == 12
    # ... and a dry run changes nothing and audits nothing.
    assert (
        boto3.client("application-autoscaling").describe_scheduled_actions(ServiceNamespace="sagemaker")[
            "ScheduledActions"
        ]
        == []
    )
    assert cli("why", "--since", "30d", "--json").json()["entries"] == []


def test_plan_refuses_a_bad_zone_a_bad_time_and_an_unmanaged_endpoint(stack, cli) -> None:
    zone = cli("plan", "--at", "2026-12-04T18:00", "--timezone", "Asia/Tokio")
    assert zone.code == ExitCode.USAGE and "--timezone: unknown time zone 'Asia/Tokio'" in zone.err
    when = cli("plan", "--at", "friday evening")
    assert when.code == ExitCode.USAGE and "--at: cannot read 'friday evening'" in when.err
    other = cli("plan", "manga-chat-dev")
    assert other.code == ExitCode.NOT_FOUND and "managed here: manga-chat-prod" in other.err
