"""Percentiles and percentile ranks over HTTP from the emulated CloudWatch, as the canary analysis reads them.

moto computes neither (it answers a 500 for ``PR(:x)`` in GetMetricData and leaves ``ExtendedStatistics`` out of
GetMetricStatistics); ``devtools/emulator_extensions/cloudwatch.py`` adds them, from the stored samples.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from devtools import emulator_extensions
from devtools import rollout_workflow as wf
from fleetops.rollout.canary_metrics import CanaryMetrics
from fleetops.rollout.checks import load_canary_checks

NS = "Test/Percentiles"
WINDOW = timedelta(minutes=10)  # around now: every datum of a test falls in one period


@pytest.fixture(autouse=True)
def _extensions() -> None:
    emulator_extensions.install()


def put(name: str, **datum: Any) -> None:
    data: list[Any] = [{"MetricName": name, "Timestamp": datetime.now(UTC) - timedelta(minutes=1), **datum}]
    boto3.client("cloudwatch").put_metric_data(Namespace=NS, MetricData=data)


def metric_data(name: str, *stats: str) -> list[list[float]]:
    queries: list[Any] = [
        {"Id": f"q{i}", "MetricStat": {"Metric": {"Namespace": NS, "MetricName": name}, "Period": 1200, "Stat": s}}
        for i, s in enumerate(stats)
    ]
    now = datetime.now(UTC)
    answer = boto3.client("cloudwatch").get_metric_data(
        MetricDataQueries=queries, StartTime=now - WINDOW, EndTime=now + WINDOW
    )
    by_id = {r["Id"]: list(r["Values"]) for r in answer["MetricDataResults"]}
    return [by_id[f"q{i}"] for i in range(len(stats))]


def extended_statistics(name: str, *stats: str) -> dict[str, float]:
    now = datetime.now(UTC)
    answer = boto3.client("cloudwatch").get_metric_statistics(
        Namespace=NS,
        MetricName=name,
        StartTime=now - WINDOW,
        EndTime=now + WINDOW,
        Period=1200,
        ExtendedStatistics=list(stats),
    )
    (point,) = answer["Datapoints"]
    return dict(point.get("ExtendedStatistics", {}))


def test_values_with_counts_give_percentiles_and_ranks_counting_each_value_that_many_times() -> None:
    # Samples: 100 once, 200 twice, 300 three times, 400 four times (10 in all).
    put("Ttft", Values=[100.0, 200.0, 300.0, 400.0], Counts=[1.0, 2.0, 3.0, 4.0])
    stats = ("p50", "p95", "PR(:200)", "PR(:250)", "PR(200:)", "PR(100:300)", "PR(:99)", "SampleCount")

    expected = [300.0, 400.0, 30.0, 30.0, 70.0, 50.0, 0.0, 10.0]
    assert metric_data("Ttft", *stats) == [[v] for v in expected]
    # The lower bound is exclusive and the upper inclusive: PR(200:) leaves the two 200s out, PR(:200) counts them.
    assert extended_statistics("Ttft", *stats[:-1]) == dict(zip(stats[:-1], expected[:-1], strict=False))


def test_a_statistic_set_counts_as_samples_only_where_it_stands_for_one_value() -> None:
    one_value = {"SampleCount": 3.0, "Sum": 1500.0, "Minimum": 500.0, "Maximum": 500.0}
    put("Latency", Values=[100.0])
    put("Latency", StatisticValues=one_value)
    assert metric_data("Latency", "p50", "PR(:100)") == [[500.0], [25.0]]  # 100, 500, 500, 500

    # A set of different values hides them: CloudWatch has no percentile for its period, and neither has this.
    put("Latency", StatisticValues={"SampleCount": 2.0, "Sum": 300.0, "Minimum": 100.0, "Maximum": 200.0})
    assert metric_data("Latency", "p50", "PR(:100)", "SampleCount") == [[], [], [6.0]]
    assert extended_statistics("Latency", "p50") == {}


@pytest.mark.parametrize("stat", ["tm90", "PR(:)", "PR(1:2:3)"])
def test_a_statistic_the_emulator_does_not_compute_is_refused_by_name(stat: str) -> None:
    put("Ttft", Value=1.0)
    with pytest.raises(ClientError, match=f"InvalidParameterValue.*The statistic {re.escape(stat)} is not computed"):
        metric_data("Ttft", stat)
    with pytest.raises(ClientError, match="is not computed by this emulator"):
        extended_statistics("Ttft", stat)


def test_the_canary_analysis_reads_both_variants_tail_counts_from_the_emulator() -> None:
    # The workflow tests' traffic: 20 TTFTs per interval from 0.5x to 1.45x of ttft_ms, the canary 20 % slower.
    wf.put_variant_metrics("canary", requests=300, ttft_ms=300.0)
    wf.put_variant_metrics("primary", requests=300, ttft_ms=250.0)
    source = CanaryMetrics(load_canary_checks())

    now = datetime.now(UTC)
    canary, primary = source.window(wf.ENDPOINT, "canary", "primary", now - WINDOW, now + WINDOW)

    # The primary's p95 is its 19th of 20 values, 250 x 1.4 = 350 ms; the tail counts are at multiples of it.
    assert primary.values["TimeToFirstTokenMs:p95"] == 350.0
    assert canary.values["TimeToFirstTokenMs:SampleCount"] == 20.0
    assert primary.values["TimeToFirstTokenMs:PR(:350)"] == 95.0
    # The canary's TTFTs are 150, 165, ..., 435 ms: 14 of 20 at or below 350 ms.
    assert canary.values["TimeToFirstTokenMs:PR(:350)"] == 70.0
