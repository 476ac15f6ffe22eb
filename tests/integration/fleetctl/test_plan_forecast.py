"""``fleetctl plan`` and ``calendar list`` on a stack whose endpoint has its own ``Invocations`` history.

The history is put into the emulator's CloudWatch as SageMaker would have published it: 8 requests/s every day
and three times that on Friday nights, during the Friday simulpub that fleet.yaml sizes at x2.5. Everything after
(GetMetricData, the forecast, the learned sizes, the plan) is the reconciler's own code through the CLI.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

import boto3

from devtools import operator_stack
from fleetops.aws.autoscaling import DIMENSION, NAMESPACE, resource_id
from tests.conftest import REPO
from tests.integration.fleetctl.conftest import check_schema, check_snapshot, put_invocations
from tests.integration.fleetctl.test_calendar import ONE_PIECE

EVERYDAY_RPS = 8.0


def friday_nights(friday_rps: float) -> Callable[[datetime], float]:
    """Everyday traffic, and ``friday_rps`` during the Friday simulpub (20:00-22:00 JST, 11:00-13:00 UTC)."""

    def rps(at: datetime) -> float:
        return friday_rps if at.weekday() == 4 and 11 <= at.hour < 13 else EVERYDAY_RPS

    return rps


def test_plan_from_three_weeks_of_history_uses_the_learned_friday_size(stack, cli) -> None:
    put_invocations(days=21, rps=friday_nights(3 * EVERYDAY_RPS))

    shown = cli("plan")

    assert shown.code == 0, shown.err
    check_snapshot("plan_history", shown.out)
    assert "plan from 21.0 days of its own Invocations: everyday 8.0-8.0 req/s, trend x1.00/week" in shown.out
    [friday_line] = [line for line in shown.out.splitlines() if line.startswith("friday-simulpub")]
    assert friday_line.split() == ["friday-simulpub", "recurring", "x2.5", "x3", "3", "0", "min", "learned", "x3"]
    document = cli("plan", "--json").json()
    check_schema(document, "plan")
    [primary] = document["variants"]
    assert (primary["forecast"]["source"], primary["forecast"]["history_days"]) == ("history", 21.0)
    sizes = {s["name"]: s for s in primary["event_sizes"]}
    friday = sizes["friday-simulpub"]
    assert (friday["configured"], friday["learned"], friday["used"], friday["occurrences"]) == (2.5, 3.0, "learned", 3)
    # 8 req/s x 1.0 forecast headroom / 4 per instance: 2 instances every day; 24 req/s on Friday night: 6, from
    # an hour before (the widened event window, the lead time inside it) ... as the shipped lead time says.
    assert primary["min_capacity_at"] == 2
    friday_step = next(s for s in primary["timeline"] if s["min_capacity"] == 6)
    assert friday_step["at"] == "2026-12-04T10:20:00Z"
    assert "Friday simulpub chapters (JP + EN) (learned x3)" in friday_step["reason"]
    assert (primary["over_cap"], primary["merged_steps"]) == ([], [])
    assert primary["served_rate"] == {
        "configured_rps": 4.0,
        "served_rps": None,
        "saturated_minutes": 0,
        "used_rps": 4.0,
        "why": "0 minutes with a queue in 14 days, 30 needed: configured",
    }


def test_plan_with_too_little_history_says_configured_levels_and_why(stack, cli) -> None:
    put_invocations(days=5, rps=friday_nights(3 * EVERYDAY_RPS))

    shown = cli("plan")

    assert shown.code == 0, shown.err
    expected = "plan from the configured levels (baseline 12 req/s): 5.0 days of Invocations history, 7 needed"
    assert expected in shown.out
    assert "learned" not in shown.out
    [primary] = cli("plan", "--json").json()["variants"]
    assert primary["forecast"]["source"] == "configuration"
    assert primary["forecast"]["why"] == "5.0 days of Invocations history, 7 needed: configured levels"
    assert primary["event_sizes"] == []
    assert primary["min_capacity_at"] == 4  # the configured baseline: 12 req/s x 1.25 / 4


def test_plan_shows_a_forecast_above_the_cap_with_the_requests_at_risk(stack, cli) -> None:
    # 60 req/s on Friday nights: 15 instances, above the cap of 12 (48 req/s): 12 req/s x 7200 s would fail.
    put_invocations(days=21, rps=friday_nights(60.0))

    shown = cli("plan")

    assert shown.code == 0, shown.err
    assert (
        "over the cap: 2026-12-04 11:00 UTC to 13:00 UTC needs up to 15 instances, cap 12: about 86400 requests at "
        "risk" in " ".join(shown.out.split())
    )
    document = cli("plan", "--json").json()
    check_schema(document, "plan")
    [over] = document["variants"][0]["over_cap"]
    assert over == {
        "start": "2026-12-04T11:00:00Z",
        "end": "2026-12-04T13:00:00Z",
        "peak_instances": 15,
        "cap": 12,
        "requests_at_risk": 86400,
    }


def test_plan_says_how_many_steps_were_merged_to_stay_within_the_quota(stack, cli, tmp_path) -> None:
    fleet = tmp_path / "fleet.yaml"
    shipped = (REPO / "layers/core/fleet_config/fleet.yaml").read_text()
    limited = re.sub(r"max_scheduled_actions: \d+", "max_scheduled_actions: 4", shipped, count=1)
    assert limited != shipped
    fleet.write_text(limited)

    document = cli("plan", "--fleet", str(fleet), "--json").json()

    check_schema(document, "plan")
    assert document["max_scheduled_actions"] == 4
    [primary] = document["variants"]
    assert len(primary["timeline"]) <= 4 and primary["merged_steps"]
    shown = cli("plan", "--fleet", str(fleet))
    merged = len(primary["merged_steps"])
    assert f"{merged} step(s) merged into their neighbours to stay within 4 scheduled actions" in shown.out


def test_calendar_list_shows_configured_and_learned_sizes_and_which_the_plan_used(stack, cli) -> None:
    put_invocations(days=21, rps=friday_nights(3 * EVERYDAY_RPS))
    assert cli(*ONE_PIECE).code == 0

    shown = cli("calendar", "list")

    assert shown.code == 0, shown.err
    check_snapshot("calendar_list_history", shown.out)
    assert f"{operator_stack.ENDPOINT}/primary: plan from 21.0 days of its own Invocations" in shown.out
    document = cli("calendar", "list", "--json").json()
    check_schema(document, "calendar_list")
    assert document["plans"] == [
        {
            "endpoint": operator_stack.ENDPOINT,
            "variant": "primary",
            "source": "history",
            "why": "21.0 days of its own Invocations",
        }
    ]
    by_name = {e["name"]: e for e in document["entries"]}
    [friday] = by_name["friday-simulpub"]["sizes"]
    assert by_name["friday-simulpub"]["multiplier"] == 2.5
    assert (friday["endpoint"], friday["learned"], friday["used"], friday["occurrences"]) == (
        operator_stack.ENDPOINT,
        3.0,
        "learned",
        3,
    )
    [one_piece] = by_name["One Piece ch. 1100"]["sizes"]
    assert (one_piece["learned"], one_piece["used"]) == (None, "configured")
    assert one_piece["why"] == "a one-off entry has no past occurrences"
    [night] = by_name["jp-night"]["sizes"]
    assert night["used"] == "forecast"


def test_calendar_list_without_history_gives_every_entry_its_configured_size(stack, cli) -> None:
    document = cli("calendar", "list", "--json").json()

    [plan] = document["plans"]
    assert (plan["source"], plan["why"]) == ("configuration", "0.0 days of Invocations history, 7 needed")
    for entry in document["entries"]:
        for size in entry["sizes"]:
            assert (size["learned"], size["used"], size["why"]) == (None, "configured", plan["why"])


def test_calendar_list_without_a_scalable_target_lists_configured_sizes_and_says_why(stack, cli) -> None:
    boto3.client("application-autoscaling").deregister_scalable_target(
        ServiceNamespace=NAMESPACE,
        ResourceId=resource_id(operator_stack.ENDPOINT, "primary"),
        ScalableDimension=DIMENSION,
    )

    shown = cli("calendar", "list")

    assert shown.code == 0, shown.err
    why = "a variant has no scalable target: the reconciler cannot plan this endpoint"
    assert f"{operator_stack.ENDPOINT}/primary: no plan, configured sizes ({why})" in " ".join(shown.out.split())
    document = cli("calendar", "list", "--json").json()
    check_schema(document, "calendar_list")
    assert [(p["source"], p["why"]) for p in document["plans"]] == [("none", why)]
    friday = next(e for e in document["entries"] if e["name"] == "friday-simulpub")
    assert [(s["used"], s["why"]) for s in friday["sizes"]] == [("configured", why)]
