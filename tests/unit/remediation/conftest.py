"""Shared inputs for the remediation unit tests: the shipped playbook, a fleet with a canary, sample events."""

from __future__ import annotations

from typing import Any

import pytest

from fleetops.config import FleetConfig, VariantConfig
from fleetops.remediation.alarm import AlarmStateChangeEvent, ParsedAlarm, parse_alarm
from fleetops.remediation.models import Playbook, load_playbook
from tests.conftest import REPO, load_event

PREFIX = "manga-llm-fleet-prod-remediation-"


@pytest.fixture(scope="session")
def playbook() -> Playbook:
    return load_playbook(REPO / "layers/core/fleet_config/playbook.yaml")


PRIMARY = VariantConfig(name="primary", role="primary", capacity_rps_per_instance=4, baseline_rps=12, floor=2, cap=12)
CANARY = VariantConfig(name="canary", role="canary", capacity_rps_per_instance=4, baseline_rps=1, floor=1, cap=2)
FLEET = FleetConfig.model_validate(
    {
        "version": "t",
        "endpoints": [{"name": "manga-chat-prod", "variants": [PRIMARY.model_dump(), CANARY.model_dump()]}],
    }
)


def event(name: str, **detail_changes: Any) -> AlarmStateChangeEvent:
    raw = load_event(name)
    raw["detail"].update(detail_changes)
    return AlarmStateChangeEvent.model_validate(raw)


def parsed(playbook: Playbook, name: str) -> ParsedAlarm:
    return parse_alarm(event(name), PREFIX, playbook)


@pytest.fixture(autouse=True)
def _offline_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stubbed clients still sign requests; fake keys keep botocore from probing instance metadata."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
