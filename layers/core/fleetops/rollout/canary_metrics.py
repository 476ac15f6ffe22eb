"""Read what a variant did in a time window from CloudWatch (names from :mod:`fleetops.metrics`)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

import boto3

from fleetops.aws.retry import RetryPolicy, call_with_retry
from fleetops.metrics import NAMESPACE, Dimension, MetricName
from fleetops.rollout.analysis import VariantStats

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

#: field of VariantStats -> (metric, statistic)
QUERIES: dict[str, tuple[MetricName, str]] = {
    "requests": (MetricName.REQUESTS, "Sum"),
    "errors": (MetricName.REQUEST_ERRORS, "Sum"),
    "p95_latency_ms": (MetricName.REQUEST_LATENCY, "p95"),
    "p95_ttft_ms": (MetricName.TIME_TO_FIRST_TOKEN, "p95"),
    "oom": (MetricName.OOM_CAUGHT, "Sum"),
    "breaker_trips": (MetricName.BREAKER_TRIPS, "Sum"),
    "engine_restarts": (MetricName.ENGINE_RESTARTS, "Sum"),
}


class CanaryMetrics:
    def __init__(self, client: CloudWatchClient | None = None, retry: RetryPolicy | None = None) -> None:
        self._client = client or boto3.client("cloudwatch")
        self._retry = retry or RetryPolicy()

    def variant_stats(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> VariantStats:
        """One GetMetricData call for every metric of the variant over ``[start, end)`` as one period.

        Sums add up over the returned periods; a percentile takes the worst period (conservative).
        """
        period = max(60, math.ceil((end - start).total_seconds() / 60) * 60)
        dimensions = [
            {"Name": Dimension.ENDPOINT.value, "Value": endpoint_name},
            {"Name": Dimension.VARIANT.value, "Value": variant_name},
        ]
        queries: list[Any] = [
            {
                "Id": field,
                "MetricStat": {
                    "Metric": {"Namespace": NAMESPACE, "MetricName": metric.value, "Dimensions": dimensions},
                    "Period": period,
                    "Stat": stat,
                },
                "ReturnData": True,
            }
            for field, (metric, stat) in QUERIES.items()
        ]
        values: dict[str, list[float]] = {field: [] for field in QUERIES}
        kwargs: dict[str, Any] = {"MetricDataQueries": queries, "StartTime": start, "EndTime": end}
        while True:
            page = call_with_retry(self._retry, self._client.get_metric_data, **kwargs)
            for result in page["MetricDataResults"]:
                values[result["Id"]].extend(float(v) for v in result.get("Values", []) if v is not None)
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
        stats: dict[str, Any] = {"variant_name": variant_name}
        for field, (_, stat) in QUERIES.items():
            found = values[field]
            if stat == "Sum":
                stats[field] = sum(found)
            else:
                stats[field] = max(found) if found else None
        return VariantStats.model_validate(stats)
