"""The canary checks are data: one YAML list gives both the CloudWatch queries and the verdict lines."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from devtools.local_system import LOCAL_CHECK_LIMITS
from fleetops.metrics import unit_of
from fleetops.rollout.analysis import analyse
from fleetops.rollout.canary_metrics import CanaryMetrics
from fleetops.rollout.checks import CANARY_CHECKS, CanaryChecksError, load_canary_checks
from fleetops.rollout.thresholds import Thresholds

START = datetime(2026, 11, 21, 9, 10, tzinfo=UTC)
END = datetime(2026, 11, 21, 9, 25, tzinfo=UTC)
QUEUE_WAIT_CHECK = """
  queue-wait-p99:
    metric: QueueWaitMs
    statistic: p99
    compare: maximum
    limit: 500
    label: p99 queue wait
"""


class StubCloudWatch:
    """GetMetricData answered from ``{variant: {(metric, stat): [values per period]}}``, in pages of three."""

    def __init__(self, data: dict[str, dict[tuple[str, str], list[float]]]) -> None:
        self.data = data
        self.calls: list[dict[str, Any]] = []

    def get_metric_data(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        queries = kwargs["MetricDataQueries"]
        first = int(kwargs.get("NextToken", 0))
        page = queries[first : first + 3]
        results = []
        for q in page:
            stat = q["MetricStat"]
            variant = stat["Metric"]["Dimensions"][1]["Value"]
            values = self.data.get(variant, {}).get((stat["Metric"]["MetricName"], stat["Stat"]), [])
            results.append({"Id": q["Id"], "Values": values})
        more = first + 3 < len(queries)
        return {"MetricDataResults": results} | ({"NextToken": str(first + 3)} if more else {})


def healthy(**changes: list[float]) -> dict[tuple[str, str], list[float]]:
    base = {
        ("Requests", "Sum"): [600.0, 400.0],
        ("RequestErrors", "Sum"): [1.0, 1.0],
        ("RequestLatencyMs", "p95"): [950.0, 1000.0],
        ("TimeToFirstTokenMs", "p95"): [300.0],
    }
    return base | {cast("tuple[str, str]", tuple(k.split(":"))): v for k, v in changes.items()}


def read(checks_path: Path, canary: dict[tuple[str, str], list[float]]) -> tuple[StubCloudWatch, CanaryMetrics]:
    cloudwatch = StubCloudWatch({"canary": canary, "primary": healthy()})
    return cloudwatch, CanaryMetrics(load_canary_checks(checks_path), client=cast(Any, cloudwatch))


def with_check(tmp_path: Path, entry: str) -> Path:
    path = tmp_path / "canary_checks.yaml"
    path.write_text(CANARY_CHECKS.read_text(encoding="utf-8") + entry, encoding="utf-8")
    return path


def test_the_shipped_checks_read_the_same_series_as_before() -> None:
    cloudwatch, source = read(CANARY_CHECKS, healthy())
    stats = source.variant_stats("manga-chat", "canary", START, END)

    queries = cloudwatch.calls[0]["MetricDataQueries"]
    assert [(q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"]) for q in queries] == [
        ("Requests", "Sum"),
        ("RequestErrors", "Sum"),
        ("RequestLatencyMs", "p95"),
        ("TimeToFirstTokenMs", "p95"),
        ("OomCaught", "Sum"),
        ("BreakerTrips", "Sum"),
        ("EngineRestarts", "Sum"),
    ]
    assert {q["MetricStat"]["Period"] for q in queries} == {900}
    assert queries[0]["MetricStat"]["Metric"]["Dimensions"] == [
        {"Name": "EndpointName", "Value": "manga-chat"},
        {"Name": "VariantName", "Value": "canary"},
    ]
    # Sums add up over periods (0 without data); a percentile takes the worst period (None without data).
    assert stats.values == {
        "Requests:Sum": 1000.0,
        "RequestErrors:Sum": 2.0,
        "RequestLatencyMs:p95": 1000.0,
        "TimeToFirstTokenMs:p95": 300.0,
        "OomCaught:Sum": 0.0,
        "BreakerTrips:Sum": 0.0,
        "EngineRestarts:Sum": 0.0,
    }
    assert len(cloudwatch.calls) == 3  # every page read (NextToken)


@pytest.mark.parametrize(
    ("wait_ms", "verdict", "outcome"), [([300.0, 800.0], "fail", "fail"), ([300.0], "pass", "pass")]
)
def test_a_check_added_only_in_config_is_queried_and_judged(
    tmp_path: Path, wait_ms: list[float], verdict: str, outcome: str
) -> None:
    cloudwatch, source = read(with_check(tmp_path, QUEUE_WAIT_CHECK), healthy(**{"QueueWaitMs:p99": wait_ms}))
    checks = load_canary_checks(tmp_path / "canary_checks.yaml")
    canary = source.variant_stats("manga-chat", "canary", START, END)
    baseline = source.variant_stats("manga-chat", "primary", START, END)
    result = analyse(canary, baseline, checks.with_overrides(Thresholds(min_requests=100)))

    queried = [
        (q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"])
        for q in cloudwatch.calls[0]["MetricDataQueries"]
    ]
    assert queried[-1] == ("QueueWaitMs", "p99") and len(queried) == 8
    [line] = [r for r in result.checks if r.name == "queue-wait-p99"]
    assert (line.outcome, line.canary, line.limit) == (outcome, max(wait_ms), 500.0)
    assert result.verdict == verdict
    if verdict == "fail":
        assert result.reasons == ("absolute SLO: p99 queue wait 800 ms above 500 ms",)
        assert result.summary.endswith("| absolute SLO: p99 queue wait 800 ms above 500 ms")


def test_a_ratio_check_added_in_config_reads_both_metrics_once(tmp_path: Path) -> None:
    entry = """
  client-error-rate:
    metric: ClientErrors
    divided_by: Requests
    statistic: Sum
    compare: baseline_increase
    limit: 0.05
    label: client error rate
    summary: "{} client errors"
"""
    cloudwatch, source = read(with_check(tmp_path, entry), healthy(**{"ClientErrors:Sum": [100.0, 50.0]}))
    checks = load_canary_checks(tmp_path / "canary_checks.yaml")
    result = analyse(
        source.variant_stats("manga-chat", "canary", START, END),
        source.variant_stats("manga-chat", "primary", START, END),
        checks.with_overrides(Thresholds(min_requests=100)),
    )

    names = [q["MetricStat"]["Metric"]["MetricName"] for q in cloudwatch.calls[0]["MetricDataQueries"]]
    assert names.count("Requests") == 1 and names[-1] == "ClientErrors"
    assert result.verdict == "fail"
    # A ratio of sums always has a value (0 without requests), so it needs no absolute gate of its own.
    assert result.reasons == ("relative to baseline: client error rate 15.00% vs baseline 0.00% (max increase 5.00%)",)
    assert "restarts 0, 15.00% client errors | baseline" in result.summary


def shipped() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(CANARY_CHECKS.read_text(encoding="utf-8"))
    return data


def edit_check(name: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["checks"].setdefault(name, {}).update(fields)

    return edit


def drop(name: str, field: str | None = None) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        if field:
            del raw["checks"][name][field]
        else:
            del raw["checks"][name]

    return edit


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            edit_check("p95-ttft", metric="TimeToFirstToken"),
            "checks.p95-ttft.metric: Value error, unknown metric 'TimeToFirstToken', not a name of "
            "fleetops.metrics.MetricName (did you mean TimeToFirstTokenMs?)",
        ),
        (edit_check("error-rate", divided_by="Requestz"), "checks.error-rate.divided_by: Value error, unknown metric"),
        (
            edit_check("p95-latency", statistic="P95"),
            "checks.p95-latency.statistic: Value error, unknown statistic 'P95': use Sum, SampleCount, Average",
        ),
        (edit_check("oom", statistic="p999"), "checks.oom.statistic: Value error, unknown statistic 'p999'"),
        (edit_check("oom", compare="at_most"), "checks.oom.compare: Input should be 'minimum_sample', 'maximum'"),
        (edit_check("oom", threshold=1), "checks.oom.threshold: Extra inputs are not permitted"),
        (edit_check("oom", limit=-1), "checks.oom.limit: Input should be greater than or equal to 0"),
        (drop("oom", "label"), "checks.oom.label: Field required"),
        (
            edit_check("oom", request_threshold="max_ooms"),
            "checks.oom.request_threshold: Value error, 'max_ooms' is not a rollout request threshold",
        ),
        (edit_check("oom", summary="OOM {value}"), "checks.oom.summary: Value error, summary 'OOM {value}' must hold"),
        (
            edit_check("Queue_Wait", metric="QueueWaitMs", statistic="p99", compare="maximum", limit=1, label="q"),
            "check names must be lower-case kebab-case",
        ),
        (drop("requests"), "no minimum_sample check: a canary without traffic would pass"),
        (
            edit_check("ttft-slo", compare="baseline_regression"),
            "relative checks ['p95-ttft', 'ttft-slo'] have no absolute gate (a maximum check on the same metric and "
            "statistic) to judge the canary by when the baseline has no value",
        ),
        (
            edit_check("latency-slo", statistic="p99"),
            "relative checks ['p95-latency'] have no absolute gate",
        ),
        (drop("engine-restarts", "request_threshold"), "thresholds ['max_engine_restarts'] override no check"),
    ],
)
def test_a_bad_check_is_refused_naming_the_check(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], expected: str
) -> None:
    raw = shipped()
    edit(raw)
    path = tmp_path / "canary_checks.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(CanaryChecksError) as caught:
        load_canary_checks(path)
    assert str(caught.value).startswith(f"invalid canary checks {path}: ")
    assert expected in str(caught.value), str(caught.value)


def test_an_unreadable_or_shapeless_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CanaryChecksError, match="cannot read canary checks"):
        load_canary_checks(tmp_path / "missing.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- metric: Requests\n", encoding="utf-8")
    with pytest.raises(CanaryChecksError, match="must be a mapping, got list"):
        load_canary_checks(listed)


def test_a_plan_carries_only_the_thresholds_the_request_set() -> None:
    assert Thresholds(min_requests=20).model_dump(mode="json") == {"min_requests": 20}
    assert Thresholds.model_validate({"min_requests": 20, "max_oom": None}) == Thresholds(min_requests=20)


def test_the_local_system_sizes_every_latency_gate_for_its_cpu_engine_by_name() -> None:
    # The local stack deploys the shipped checks with these limits; a renamed check would leave a GPU-sized
    # latency gate in front of the slow CPU model (or size nothing), and the local rollouts would fail far later.
    shipped = load_canary_checks()
    assert set(LOCAL_CHECK_LIMITS) <= set(shipped.checks)
    latency_gates = {n for n, c in shipped.checks.items() if unit_of(c.metric) == "Milliseconds"}
    assert latency_gates == {"p95-latency", "p95-ttft", "latency-slo", "ttft-slo"}
    assert latency_gates <= set(LOCAL_CHECK_LIMITS)


def test_the_window_counts_an_slo_percentile_at_the_limit_the_rollout_set() -> None:
    # The TTFT SLO is judged on the requests over its limit: a rollout that tightens it to 300 ms must read the
    # share at or below 300 ms, not at the declared 500 ms (the adapter is built once with the declared checks).
    cloudwatch, source = read(CANARY_CHECKS, healthy())
    tight = load_canary_checks().with_overrides(Thresholds(max_ttft_p95_ms=300))
    source.window("manga-chat", "canary", "primary", START, END, tight)

    asked = {
        q["MetricStat"]["Stat"]
        for call in cloudwatch.calls
        for q in call["MetricDataQueries"]
        if q["MetricStat"]["Metric"]["MetricName"] == "TimeToFirstTokenMs"
    }
    assert {"SampleCount", "PR(:300)"} <= asked and "PR(:500)" not in asked
    before = len(cloudwatch.calls)
    source.window("manga-chat", "canary", "primary", START, END)
    assert "PR(:500)" in {q["MetricStat"]["Stat"] for c in cloudwatch.calls[before:] for q in c["MetricDataQueries"]}
