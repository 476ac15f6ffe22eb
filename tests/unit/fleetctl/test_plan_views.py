"""``fleetctl plan`` and ``calendar list`` for people: where a plan came from, the entries' sizes, what it cannot do."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from rich.console import Console, RenderableType

from fleetctl.planning import (
    PlannedEventSize,
    PlannedForecast,
    PlannedOverCap,
    PlannedRate,
    PlannedStep,
    PlannedVariant,
    PlanReport,
)
from fleetctl.releases import CalendarListing, CalendarRow, EntrySize, PlanSource
from fleetctl.views import planning, releases
from tests.conftest import REPO

AT = datetime(2026, 12, 1, tzinfo=UTC)
FRIDAY = datetime(2026, 12, 4, 11, tzinfo=UTC)
HISTORY = PlannedForecast(
    source="history",
    why="forecast from 21.0 days of the variant's own Invocations",
    history_days=21.0,
    weekly_growth=1.012,
    level_ratio=1.0,
    configured_baseline_rps=12.0,
    forecast_low_rps=4.6,
    forecast_peak_rps=13.1,
)


def _render(renderable: RenderableType, colour: bool = False) -> str:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=colour, color_system="standard" if colour else None)
    console.print(renderable)
    return out.getvalue()


def _step(at: datetime, level: int) -> PlannedStep:
    return PlannedStep(at=at, timezone="UTC", min_capacity=level, reason="forecast")


def _report(**variant: object) -> PlanReport:
    fields: dict[str, object] = {
        "endpoint": "manga-chat-prod",
        "variant": "primary",
        "min_capacity_at": 3,
        "timeline": [_step(FRIDAY, 12)],
        "forecast": HISTORY,
        "event_sizes": [],
        "over_cap": [],
        "merged_steps": [],
        "served_rate": None,
    } | variant
    return PlanReport(
        stack="manga-llm-fleet",
        at=AT,
        config_version="test",
        kill_switch_engaged=False,
        dry_run=False,
        max_scheduled_actions=150,
        variants=[PlannedVariant.model_validate(fields)],
        changes=[],
        invalid_entries=[],
        problems=[],
    )


def test_a_history_plan_says_what_the_forecast_saw_and_each_entrys_sizes() -> None:
    sizes = [
        PlannedEventSize(
            name="friday-simulpub",
            kind="recurring",
            configured=2.5,
            learned=3.0,
            occurrences=3,
            early_minutes=10,
            used="learned",
            why="peak over everyday demand in the last 3 occurrence(s)",
        ),
        PlannedEventSize(
            name="spring-anime",
            kind="yearly",
            configured=2.0,
            learned=None,
            occurrences=0,
            early_minutes=0,
            used="configured",
            why="0 past occurrence(s) in the history, 2 needed",
        ),
    ]

    text = _render(planning.render(_report(event_sizes=sizes)))

    assert "plan from 21.0 days of its own Invocations: everyday 4.6-13.1 req/s, trend x1.01/week" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith(("friday", "spring"))}
    assert rows["friday-simulpub"] == ["friday-simulpub", "recurring", "x2.5", "x3", "3", "10", "min", "learned", "x3"]
    assert rows["spring-anime"][:6] == ["spring-anime", "yearly", "x2", "-", "0", "-"]
    assert "configured x2: 0 past occurrence(s) in the history, 2 needed" in " ".join(text.split())


def test_a_configured_plan_says_why_and_shows_no_sizes() -> None:
    configured = PlannedForecast(
        source="configuration",
        why="could not read the Invocations history (AccessDenied): configured levels",
        history_days=0.0,
        weekly_growth=1.0,
        level_ratio=1.0,
        configured_baseline_rps=12.0,
        forecast_low_rps=None,
        forecast_peak_rps=None,
    )

    text = _render(planning.render(_report(forecast=configured)))

    assert (
        "plan from the configured levels (baseline 12 req/s): could not read the Invocations history (AccessDenied)"
        in " ".join(text.split())
    )
    assert "calendar entry" not in text


def test_over_the_cap_is_red_with_the_requests_at_risk_and_merged_steps_are_counted() -> None:
    over = PlannedOverCap(start=FRIDAY, end=FRIDAY.replace(hour=13), peak_instances=19, cap=12, requests_at_risk=86400)
    merged = [_step(FRIDAY.replace(hour=h), 4) for h in (14, 15)]

    coloured = _render(planning.render(_report(over_cap=[over], merged_steps=merged)), colour=True)

    line = next(line for line in coloured.splitlines() if "over the cap" in line)
    assert "\x1b[1;31m" in line  # bold red
    text = " ".join(_render(planning.render(_report(over_cap=[over], merged_steps=merged))).split())
    assert (
        "over the cap: 2026-12-04 11:00 UTC to 13:00 UTC needs up to 19 instances, cap 12: about 86400 requests at "
        "risk" in text
    )
    assert "2 step(s) merged into their neighbours to stay within 150 scheduled actions (first at 2026-12-04 14:00" in (
        text
    )


def test_a_rate_lowered_to_what_the_instances_served_is_shown_with_what_to_do() -> None:
    why = (
        "instances served 2.8/s with a queue, against 4 configured: planning with 2.52; measure and set "
        "capacity_rps_per_instance (and InvocationsPerInstanceTarget) for the model now serving"
    )
    lowered = PlannedRate(configured_rps=4, served_rps=2.8, saturated_minutes=120, used_rps=2.52, why=why)
    held = PlannedRate(configured_rps=4, served_rps=3.9, saturated_minutes=40, used_rps=4, why="holds")

    text = " ".join(_render(planning.render(_report(served_rate=lowered))).split())

    assert f"rate per instance: {why}" in text
    assert "rate per instance" not in _render(planning.render(_report(served_rate=held)))


def test_calendar_list_shows_each_endpoints_plan_source_and_the_size_it_gives_each_entry() -> None:
    row = CalendarRow(
        source="fleet.yaml",
        event_id=None,
        name="friday-simulpub",
        kind="recurring",
        timezone="Asia/Tokyo",
        multiplier=2.5,
        reason="Friday simulpub",
        endpoints=[],
        next_start=FRIDAY,
        next_end=FRIDAY.replace(hour=13),
        valid=True,
        errors=[],
        sizes=[
            EntrySize(
                endpoint="manga-chat-prod", variant="primary", learned=3.0, used="learned", occurrences=3, why=""
            ),
            EntrySize(
                endpoint="manga-chat-eu",
                variant="primary",
                learned=None,
                used="configured",
                occurrences=0,
                why="3.0 days of Invocations history, 7 needed",
            ),
        ],
    )
    listing = CalendarListing(
        stack="manga-llm-fleet",
        now=AT,
        config_version="test",
        plans=[
            PlanSource(
                endpoint="manga-chat-prod", variant="primary", source="history", why="21.0 days of its own Invocations"
            ),
            PlanSource(
                endpoint="manga-chat-eu",
                variant="primary",
                source="configuration",
                why="3.0 days of Invocations history, 7 needed",
            ),
        ],
        entries=[row],
    )

    text = _render(releases.render_listing(listing))

    assert "manga-chat-prod/primary: plan from 21.0 days of its own Invocations" in text
    assert "manga-chat-eu/primary: configured levels and sizes (3.0 days of Invocations history, 7 needed)" in text
    sized = [line.split() for line in text.splitlines() if line.startswith("friday-simulpub ")]
    assert sized == [
        ["friday-simulpub", "manga-chat-prod/primary", "x2.5", "x3", "3", "learned", "x3"],
        ["friday-simulpub", "manga-chat-eu/primary", "x2.5", "-", "0", "configured", "x2.5"],
    ]


def test_calendar_list_still_lists_when_the_plan_cannot_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError

    from fleetctl import planning as core
    from fleetctl.releases import entry_sizes
    from fleetops.calendar import RecurringEvent
    from fleetops.config import load_fleet_config

    def denied(*_: object) -> object:
        error = {"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}
        raise ClientError(error, "DescribeScalableTargets")  # type: ignore[arg-type]

    monkeypatch.setattr(core, "plan_endpoint", denied)
    fleet = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
    friday = RecurringEvent.model_validate(
        {"name": "friday-simulpub", "weekday": "friday", "local_time": "20:00", "timezone": "Asia/Tokyo"}
        | {"duration_minutes": 120, "multiplier": 2.5}
    )

    [plan], sizes = entry_sizes(fleet, "prod", [friday], AT)

    assert plan.source == "none"
    assert plan.why == "could not plan it: access denied on DescribeScalableTargets: not allowed"
    assert [(s.used, s.why) for s in sizes["friday-simulpub"]] == [("configured", plan.why)]
