"""Demo part 2: release-calendar pre-scaling through the real prescale handler on emulated AWS."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from devtools.aws_resources import create_core_resources, create_endpoint
from devtools.emulator import MotoServer
from devtools.lambda_dispatch import FakeLambdaContext, load_handler_module
from fleetops.aws.autoscaling import AutoScaling
from fleetops.prescale.calendar_table import CalendarTable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENDPOINT = "manga-chat-prod"
JST = ZoneInfo("Asia/Tokyo")


def _invoke(event: dict[str, Any]) -> dict[str, Any]:
    handler = load_handler_module("prescale")
    result: dict[str, Any] = handler.lambda_handler(event, FakeLambdaContext(function_name="prescale"))
    return result


def _print_plan(title: str, plan: dict[str, Any]) -> None:
    now = datetime.fromisoformat(plan["now"])
    mode = "DRY RUN - nothing changed" if plan["dry_run"] else ("applied" if plan["applied"] else "held back")
    print(f"\n--- {title}\n    now = {now:%a %Y-%m-%d %H:%M} UTC ({now.astimezone(JST):%a %H:%M} JST), {mode}")
    for bad in plan["invalid_entries"]:
        print(f"    SKIPPED invalid entry {bad['name']!r} ({bad['source']}): {'; '.join(bad['errors'])}")
    if not plan["changes"]:
        print("    no changes: scheduled actions already match the calendar")
    for change in plan["changes"]:
        side = change["after"] or change["before"]
        capacity = side.get("min_capacity")
        print(f"    {change['outcome']:>8} {change['kind']:<9} {change['name']:<50} min={capacity}  {change['reason']}")


def _print_timeline() -> None:
    actions = AutoScaling().list_scheduled_actions(ENDPOINT, "primary", "prescale-")
    target = AutoScaling().get_target(ENDPOINT, "primary")
    print(f"\n    Scheduled actions now on {ENDPOINT}/primary (current MinCapacity {target and target.min_capacity}):")
    print(f"    {'local time':<36} {'UTC':<18} {'MinCapacity':>11}")
    for action in sorted(actions, key=lambda a: a.name):
        utc = datetime.strptime(action.name.rsplit("-", 1)[1], "%Y%m%dT%H%MZ").replace(tzinfo=UTC)
        local = action.schedule.removeprefix("at(").removesuffix(")").replace("T", " ")
        bar = "#" * action.min_capacity
        print(f"    {local[:16]} {action.timezone:<19} {utc:%a %m-%d %H:%M}   {action.min_capacity:>5}  {bar}")


def run(emulator: MotoServer) -> None:
    resources = create_core_resources()
    os.environ.update(resources.environment())
    os.environ["FLEET_CONFIG_PATH"] = os.path.join(REPO, "layers/core/fleet_config/fleet.yaml")
    os.environ["PLAYBOOK_PATH"] = os.path.join(REPO, "layers/core/fleet_config/playbook.yaml")
    os.environ["ENVIRONMENT_NAME"] = "prod"  # the prod stack: it plans the prod endpoints of fleet.yaml only
    create_endpoint(ENDPOINT, {"primary": (4, 4, 12)})
    print(f"Emulated AWS at {emulator.endpoint_url}: endpoint {ENDPOINT!r} with a scalable target (min 4, max 12).")
    print("Calendar: fleet.yaml (Shonen Jump Mondays 18:00 JST x2, Friday simulpub 20:00 JST x2.5,")
    print("US Saturday club 10:00 Los Angeles x1.5, JP night 01:00-08:00 x0.4) + entries of any kind in DynamoDB.")

    plan = _invoke({"trigger": "schedule", "time": "2026-11-30T00:00:00Z"})
    _print_plan("Monday 09:00 JST: the scheduler's run plans the next 7 days", plan)
    _print_timeline()

    calendar = CalendarTable(resources.calendar_table)
    calendar.put(
        "one-piece-1100",
        {
            "name": "One Piece ch. 1100",
            "start": "2026-12-04T20:00",
            "timezone": "Asia/Tokyo",
            "duration_minutes": 180,
            "multiplier": 3,
            "reason": "One Piece chapter 1100 release",
        },
    )
    calendar.put(
        "year-end-ranking",
        {
            "kind": "yearly",
            "name": "Year-end manga ranking",
            "month": 12,
            "day": 8,
            "local_time": "12:00",
            "end": "15:00",
            "timezone": "Asia/Tokyo",
            "multiplier": 1.5,
            "reason": "Year-end manga ranking announced (every 8 December)",
        },
    )
    calendar.put(
        "typo",
        {
            "name": "Typo'd zone",
            "start": "2026-12-05T20:00",
            "timezone": "Asia/Tokio",
            "duration_minutes": 60,
            "multiplier": 2,
        },
    )
    stream_event = {
        "Records": [
            {
                "eventSource": "aws:dynamodb",
                "eventName": "INSERT",
                "dynamodb": {
                    "ApproximateCreationDateTime": datetime(2026, 12, 2, 3, tzinfo=UTC).timestamp(),
                    "Keys": {"event_id": {"S": "one-piece-1100"}},
                },
            }
        ]
    }
    plan = _invoke(stream_event)
    _print_plan(
        "An operator adds One Piece ch. 1100 (Fri 20:00 JST x3), the yearly ranking (8 Dec 12:00 JST x1.5) and a"
        " typo'd entry: the stream triggers a run",
        plan,
    )
    _print_timeline()

    plan = _invoke({"trigger": "schedule", "time": "2026-12-02T03:15:00Z"})
    _print_plan("Fifteen minutes later the scheduler runs again", plan)

    plan = _invoke({"trigger": "schedule", "time": "2026-12-04T10:30:00Z"})
    _print_plan("Friday 19:30 JST, inside the lead window: capacity for the release is raised now", plan)

    calendar.delete("one-piece-1100")
    plan = _invoke({"trigger": "manual:oncall", "time": "2026-12-04T10:45:00Z", "dry_run": True})
    _print_plan("The release is cancelled; on-call asks for a dry run first", plan)
