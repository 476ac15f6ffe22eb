"""The playbook file: the shipped defaults, and the validator's answers to a wrong playbook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetops.metrics import MetricName
from fleetops.remediation.actions import ActionType
from fleetops.remediation.models import Playbook, load_playbook
from fleetops.remediation.playbook_file import PlaybookError, load_rails
from tests.conftest import REPO

SHIPPED = REPO / "layers/core/fleet_config/playbook.yaml"


def test_shipped_playbook_has_the_field_defaults(playbook: Playbook) -> None:
    queue = playbook.alarms["queue-depth"]
    assert (queue.metric, queue.threshold, queue.period_seconds, queue.evaluation_periods) == (
        MetricName.QUEUE_DEPTH,
        50,
        60,
        1,
    )
    oom = playbook.alarms["oom"]
    assert (oom.metric, oom.statistic, oom.threshold, oom.period_seconds) == (MetricName.OOM_CAUGHT, "Sum", 0, 300)
    kv = playbook.alarms["kv-cache"]
    assert (kv.threshold, kv.period_seconds * kv.evaluation_periods) == (95, 300)
    assert (playbook.alarms["ttft-p95"].statistic, playbook.alarms["ttft-p95"].threshold) == ("p95", 500)
    assert playbook.alarms["oom"].on_alarm.canary == (ActionType.ROLLBACK, ActionType.NOTIFY)
    assert playbook.alarms["oom"].on_alarm.primary == (ActionType.NOTIFY,)
    assert set(playbook.alarms) == {
        "queue-depth",
        "saturation",
        "oom",
        "breaker-trips",
        "engine-restarts",
        "kv-cache",
        "ttft-p95",
        "prefix-cache",
        "adapter-latency",
        "error-rate",
        "gpu-unhealthy",
        "queue-wait-p95",
        "preemptions",
    }


@pytest.mark.parametrize(("breach", "step"), [(1.0, 2), (1.99, 2), (2.0, 4), (3.99, 4), (4.0, 8), (50.0, 8)])
def test_steps_by_breach_size(playbook: Playbook, breach: float, step: int) -> None:
    assert playbook.step_for(breach) == step


def _write(tmp_path: Path, change: Any) -> Path:
    raw = yaml.safe_load(SHIPPED.read_text())
    change(raw)
    path = tmp_path / "playbook.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["alarms"]["oom"].update(metric="OOMs"), "Input should be 'QueueDepth'"),
        (
            lambda r: r["alarms"]["oom"]["on_alarm"].update(primary=["rollback"]),
            "only a canary variant can be rolled back",
        ),
        (lambda r: r["alarms"]["queue-depth"].update(on_ok=["scale_out"]), "the responder never scales in"),
        (lambda r: r.update(scale_out_steps=[{"add": 8}, {"below_breach": 2.0, "add": 2}]), "only the last step may"),
        (
            lambda r: r.update(
                scale_out_steps=[{"below_breach": 4, "add": 2}, {"below_breach": 2, "add": 4}, {"add": 8}]
            ),
            "must strictly increase",
        ),
        (lambda r: r["alarms"].update({"Queue_Depth": r["alarms"]["queue-depth"]}), "lower-case kebab-case"),
        (lambda r: r["alarms"]["queue-depth"].update(on_alarm={"primary": ["page_someone"]}), "on_alarm.primary.0"),
        (lambda r: r["rails"].update(cooldown_seconds=-5), "rails.cooldown_seconds"),
        (lambda r: r["rails"].update(raise_hold_seconds=30), "rails.raise_hold_seconds"),
        (lambda r: r["rails"].update(raise_hold_seconds=86401), "rails.raise_hold_seconds"),
    ],
)
def test_a_wrong_playbook_is_rejected_with_a_message_naming_the_problem(
    tmp_path: Path, change: Any, message: str
) -> None:
    path = _write(tmp_path, change)
    with pytest.raises(PlaybookError, match=f"invalid playbook {path}") as caught:
        load_playbook(path)
    assert message in str(caught.value)


def test_unreadable_playbook(tmp_path: Path) -> None:
    with pytest.raises(PlaybookError, match="cannot read playbook"):
        load_playbook(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("alarms: [unclosed")
    with pytest.raises(PlaybookError, match="cannot read playbook"):
        load_playbook(bad)


def test_a_playbook_without_a_raise_hold_holds_raises_fifteen_minutes(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["rails"].pop("raise_hold_seconds"))
    assert load_playbook(path).rails.raise_hold_seconds == 900


def test_the_rails_alone_are_read_as_the_whole_playbook_reads_them(playbook: Playbook) -> None:
    assert load_rails(SHIPPED) == playbook.rails


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["rails"].update(raise_hold_seconds=30), "rails.raise_hold_seconds: Input should be greater"),
        (lambda r: r["rails"].pop("lease_ttl_seconds"), "rails.lease_ttl_seconds: Field required"),
        (lambda r: r.pop("rails"), "rails: Input should be a valid dictionary"),
    ],
)
def test_wrong_rails_are_refused_naming_the_file_and_the_field(tmp_path: Path, change: Any, message: str) -> None:
    # What pre-scaling's cold start says about the playbook it reads the raise hold from.
    path = _write(tmp_path, change)
    with pytest.raises(PlaybookError, match=f"invalid playbook {path}") as caught:
        load_rails(path)
    assert message in str(caught.value)
