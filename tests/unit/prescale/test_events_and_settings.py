"""Reading the trigger event and the environment: clear messages for bad input."""

from __future__ import annotations

import pytest

from fleetops.config import FleetConfigError, load_fleet_config
from fleetops.prescale.events import InvalidEventError, parse_event
from fleetops.settings import CommonSettings, SettingsError
from tests.conftest import REPO, load_event


def test_every_sample_event_parses() -> None:
    for name in (
        "prescale_schedule",
        "prescale_eventbridge_rule",
        "prescale_calendar_change",
        "prescale_manual_dry_run",
    ):
        assert parse_event(load_event(name)).time.isoformat() == "2026-12-04T08:00:00+00:00"


def test_a_list_is_not_an_event() -> None:
    with pytest.raises(InvalidEventError, match="expected a JSON object, got list"):
        parse_event([1, 2])


def test_missing_environment_is_named_at_cold_start() -> None:
    with pytest.raises(SettingsError, match="AUDIT_TABLE: Field required"):
        CommonSettings.from_env({})


def test_the_shipped_fleet_file_is_valid() -> None:
    config = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
    assert config.endpoint("manga-chat-prod") is not None


def test_a_production_floor_below_two_fails_the_fleet_file(tmp_path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text(
        "version: x\nendpoints:\n  - name: ep\n    variants:\n      - {name: p, capacity_rps_per_instance: 1,"
        " baseline_rps: 1, floor: 1, cap: 4}\n"
    )
    with pytest.raises(FleetConfigError, match="production primary variants need floor >= 2"):
        load_fleet_config(bad)


def test_unreadable_fleet_file(tmp_path) -> None:
    with pytest.raises(FleetConfigError, match="cannot read fleet config"):
        load_fleet_config(tmp_path / "missing.yaml")
