"""The SLOs are declared once (``playbook.yaml``, ``slo``): the alarms and the on-call dashboard use those numbers.

The dashboard ``<stack>-slo`` draws each objective as a horizontal annotation and names it in its text; the
error-rate and adapter-latency alarms of ``templates/variant_remediation.yaml`` fire at the declared numbers.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from fleetops.remediation.models import Playbook, load_playbook
from fleetops.remediation.playbook_file import PlaybookError
from tests.conftest import REPO
from tests.unit.cfn_yaml import load, resources_of_type

PLAYBOOK_PATH = REPO / "layers/core/fleet_config/playbook.yaml"
MAIN = load(REPO / "template.yaml")
VARIANT = load(REPO / "templates/variant_remediation.yaml")


@pytest.fixture(scope="module")
def playbook() -> Playbook:
    return load_playbook(PLAYBOOK_PATH)


def _dashboard(template: dict[str, Any]) -> dict[str, Any]:
    body = template["Resources"]["ServiceLevelDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    return dict(json.loads(re.sub(r"\$\{[^}]+\}", "x", body)))


def _annotations(dashboard: dict[str, Any]) -> dict[str, float]:
    found = {}
    for widget in dashboard["widgets"]:
        for line in widget["properties"].get("annotations", {}).get("horizontal", []):
            found[line["label"]] = float(line["value"])
    return found


def expected_lines(playbook: Playbook) -> dict[str, float]:
    slo = playbook.slo
    return {
        "availability SLO": slo.availability_percent,
        "error-rate SLO": slo.error_rate_percent,
        "TTFT p50 SLO": slo.ttft_p50_ms,
        "latency p99 SLO": slo.latency_p99_ms,
        "adapter-latency alarm": slo.adapter_latency_alarm_ms,
        "adapter baseline p95": slo.adapter_latency_p95_baseline_ms,
        "prefix-cache alarm": playbook.alarms["prefix-cache"].threshold,
        "queue-wait alarm": playbook.alarms["queue-wait-p95"].threshold,
    }


def check_dashboard(dashboard: dict[str, Any], playbook: Playbook) -> None:
    assert _annotations(dashboard) == expected_lines(playbook)
    text = " ".join(w["properties"].get("markdown", "") for w in dashboard["widgets"] if w["type"] == "text")
    titles = " ".join(w["properties"].get("title", "") for w in dashboard["widgets"])
    for name, value in expected_lines(playbook).items():
        assert f"{value:g}" in text + titles, f"{name} ({value:g}) is not named on the dashboard"


def test_the_dashboard_draws_the_declared_slos(playbook: Playbook) -> None:
    check_dashboard(_dashboard(MAIN), playbook)


def test_the_dashboard_check_catches_a_drifted_number(playbook: Playbook) -> None:
    dashboard = _dashboard(MAIN)
    for widget in dashboard["widgets"]:
        for line in widget["properties"].get("annotations", {}).get("horizontal", []):
            if line["label"] == "TTFT p50 SLO":
                line["value"] += 50
    with pytest.raises(AssertionError):
        check_dashboard(dashboard, playbook)


def _thresholds(kind: str) -> set[float]:
    found = set()
    for alarm in resources_of_type(VARIANT, "AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        name = props["AlarmName"]["Fn::Sub"]
        if f"}}{kind}-" in (name[0] if isinstance(name, list) else name):
            found.add(float(props["Threshold"]))
    return found


def test_the_alarms_fire_at_the_declared_numbers(playbook: Playbook) -> None:
    assert _thresholds("error-rate") == {playbook.slo.error_rate_percent}
    assert _thresholds("ttft-p95") == {playbook.slo.ttft_p95_ms}
    assert _thresholds("adapter-latency") == {playbook.slo.adapter_latency_alarm_ms}
    assert playbook.slo.adapter_latency_alarm_ms == 2 * playbook.slo.adapter_latency_p95_baseline_ms
    assert _thresholds("prefix-cache") == {50.0}
    prefix = playbook.alarms["prefix-cache"]
    assert (prefix.comparison, prefix.period_seconds * prefix.evaluation_periods) == ("LessThanThreshold", 900)


def test_the_playbook_refuses_an_alarm_threshold_that_is_not_the_slo(tmp_path: Any) -> None:
    text = PLAYBOOK_PATH.read_text().replace("error_rate_percent: 5 ", "error_rate_percent: 2 ")
    assert text != PLAYBOOK_PATH.read_text()
    (tmp_path / "playbook.yaml").write_text(text)
    with pytest.raises(PlaybookError, match="error-rate"):
        load_playbook(tmp_path / "playbook.yaml")


def test_both_variants_get_the_adapter_alarms_of_the_served_adapters() -> None:
    from gateway.config import DEFAULT_CONFIG, load_gateway_config

    served = ",".join(load_gateway_config(DEFAULT_CONFIG).routing.adapters)
    assert VARIANT["Parameters"]["LatencyAlarmAdapters"]["Default"] == served
    for nested in ("PrimaryVariantRemediation", "CanaryVariantRemediation"):
        given = MAIN["Resources"][nested]["Properties"]["Parameters"]
        assert given.get("LatencyAlarmAdapters", served) == served
