"""Burn-rate arithmetic: thresholds from the SLO and the burn rate, and tiers no window could show refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetops.metrics import MetricName
from fleetops.remediation.burn_rate import BurnRateError, bad_percent_threshold, burn_rate_alarms, objectives
from fleetops.remediation.models import Playbook, load_playbook
from fleetops.remediation.playbook_file import PlaybookError
from tests.conftest import REPO

SHIPPED = REPO / "layers/core/fleet_config/playbook.yaml"


@pytest.mark.parametrize(
    ("budget", "burn", "threshold"),
    [
        (0.1, 14.4, 1.44),  # 99.9 %: 2 % of a 30-day budget in an hour
        (0.1, 6, 0.6),  # 5 % in six hours
        (0.1, 1, 0.1),  # exactly the SLO
        (5.0, 14.4, 72.0),  # TTFT: 95 % within the limit
        (1.0, 6, 6.0),  # answer latency: 99 % within the limit
    ],
)
def test_threshold_is_burn_rate_times_budget(budget: float, burn: float, threshold: float) -> None:
    assert bad_percent_threshold(budget, burn) == threshold


def test_a_burn_no_window_can_show_is_refused() -> None:
    with pytest.raises(BurnRateError, match=r"a 14.4x burn of a 10 % budget needs 144 % bad requests"):
        bad_percent_threshold(10.0, 14.4)


def test_the_shipped_slo(playbook: Playbook) -> None:
    assert playbook.slo.availability_percent == 99.9
    by_name = {o.name: o for o in objectives(playbook.slo)}
    assert by_name["availability"].budget_percent == pytest.approx(0.1)
    assert (by_name["availability"].metric, by_name["availability"].divided_by) == (
        MetricName.REQUEST_ERRORS,
        MetricName.REQUESTS,
    )
    assert (by_name["ttft"].good_within_ms, by_name["latency"].good_within_ms) == (500, 15000)

    alarms = {a.name: a for a in burn_rate_alarms(playbook.slo)}
    fast, slow = alarms["availability-fast-burn"], alarms["availability-slow-burn"]
    assert (fast.tier.action, fast.long.period_seconds, fast.short.period_seconds, fast.long.threshold) == (
        "page",
        3600,
        300,
        1.44,
    )
    assert (slow.tier.action, slow.long.period_seconds, slow.short.period_seconds, slow.short.threshold) == (
        "notify",
        21600,
        1800,
        0.6,
    )
    # A latency window alarms while too few requests are good: PR(:500) below 100 - 72.
    ttft = alarms["ttft-fast-burn"].long
    assert (ttft.statistic, ttft.comparison, ttft.threshold, ttft.name) == (
        "PR(:500)",
        "LessThanThreshold",
        28.0,
        "ttft-fast-burn-1h",
    )
    assert alarms["latency-slow-burn"].short.threshold == 94.0
    # The 1 %-errors case the per-minute error-rate alarm (5 %) never sees: a 10x burn, over the slow tier's 6x only.
    assert slow.long.threshold < 1.0 < fast.long.threshold < playbook.slo.error_rate_percent


def _write(tmp_path: Path, old: str, new: str) -> Path:
    text = SHIPPED.read_text()
    assert old in text
    (tmp_path / "playbook.yaml").write_text(text.replace(old, new, 1))
    return tmp_path / "playbook.yaml"


def test_the_playbook_refuses_a_tier_that_cannot_alarm(tmp_path: Path) -> None:
    # A 200x tier of the TTFT objective (5 % may be slow): 1000 % slow requests. The loader names the problem.
    path = _write(tmp_path, "burn_rate: 14.4,", "burn_rate: 200,")
    with pytest.raises(
        PlaybookError, match=r"slo ttft, burn-rate tier 'fast': a 200x burn of a 5 % budget needs 1000 %"
    ):
        load_playbook(path)


def test_the_playbook_refuses_a_short_window_longer_than_the_long_one(tmp_path: Path) -> None:
    path = _write(tmp_path, "short_window_minutes: 5,", "short_window_minutes: 90,")
    with pytest.raises(PlaybookError, match="the short window must be shorter than the long one"):
        load_playbook(path)


def test_the_playbook_refuses_a_window_cloudwatch_cannot_evaluate(tmp_path: Path) -> None:
    path = _write(tmp_path, "long_window_minutes: 360,", "long_window_minutes: 20160,")  # 14 days
    with pytest.raises(PlaybookError, match="less than or equal to 10080"):
        load_playbook(path)


def test_the_ttft_p95_alarm_is_the_slo(tmp_path: Path) -> None:
    path = _write(tmp_path, "ttft_p95_ms: 500 ", "ttft_p95_ms: 400 ")
    with pytest.raises(PlaybookError, match="ttft-p95"):
        load_playbook(path)
