"""Read what a variant did in a time window from CloudWatch: the series the declared canary checks name."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetops.aws import clients
from fleetops.metrics import NAMESPACE, Dimension
from fleetops.rollout.analysis import VariantStats, tail_series
from fleetops.rollout.checks import ADDITIVE, CanaryChecks, Series

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient


def metric_data_queries(
    series: Sequence[Series], endpoint_name: str, variant_name: str, period: int
) -> list[dict[str, Any]]:
    """One GetMetricData query per series, ``Id`` ``q<index>`` (ids must start with a lower-case letter).

    Examples
    --------
    >>> from fleetops.metrics import MetricName
    >>> [q] = metric_data_queries([Series(MetricName.REQUESTS, "Sum")], "e", "canary", 900)
    >>> q["Id"], q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"], q["MetricStat"]["Period"]
    ('q0', 'Requests', 'Sum', 900)
    """
    dimensions = [
        {"Name": Dimension.ENDPOINT.value, "Value": endpoint_name},
        {"Name": Dimension.VARIANT.value, "Value": variant_name},
    ]
    return [
        {
            "Id": f"q{i}",
            "MetricStat": {
                "Metric": {"Namespace": NAMESPACE, "MetricName": s.metric.value, "Dimensions": dimensions},
                "Period": period,
                "Stat": s.statistic,
            },
            "ReturnData": True,
        }
        for i, s in enumerate(series)
    ]


def combine(statistic: str, found: Sequence[float]) -> float | None:
    """One value from a series' periods: sums add up (0 without data); the others take the worst period.

    Examples
    --------
    >>> combine("Sum", []), combine("p95", []), combine("p95", [300.0, 420.0]), combine("Minimum", [3.0, 1.0])
    (0.0, None, 420.0, 1.0)
    """
    if statistic in ADDITIVE:
        return float(sum(found))
    if not found:
        return None
    return min(found) if statistic == "Minimum" else max(found)


class CanaryMetrics:
    def __init__(self, checks: CanaryChecks, client: CloudWatchClient | None = None) -> None:
        self._checks = checks
        self._series = checks.series()
        self._client = client or clients.client("cloudwatch")

    def variant_stats(
        self,
        endpoint_name: str,
        variant_name: str,
        start: datetime,
        end: datetime,
        series: Sequence[Series] | None = None,
    ) -> VariantStats:
        """One GetMetricData call for every series of the variant (the checks' unless given) over ``[start, end)``
        as one period."""
        period = max(60, math.ceil((end - start).total_seconds() / 60) * 60)
        series = self._series if series is None else tuple(series)
        queries: list[Any] = metric_data_queries(series, endpoint_name, variant_name, period)
        found: dict[str, list[float]] = {q["Id"]: [] for q in queries}
        kwargs: dict[str, Any] = {"MetricDataQueries": queries, "StartTime": start, "EndTime": end}
        while True:
            page = self._client.get_metric_data(**kwargs)
            for result in page["MetricDataResults"]:
                found[result["Id"]].extend(float(v) for v in result.get("Values", []) if v is not None)
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
        values = {s.key: combine(s.statistic, found[f"q{i}"]) for i, s in enumerate(series)}
        return VariantStats(variant_name=variant_name, values=values)

    def window(
        self,
        endpoint_name: str,
        canary_variant: str,
        baseline_variant: str,
        start: datetime,
        end: datetime,
        checks: CanaryChecks | None = None,
    ) -> tuple[VariantStats, VariantStats]:
        """The canary's and the baseline's numbers over the same window, as the analysis compares them.

        The checks' series first; then both variants' counts at or below the bounds the checks on percentiles test
        (:func:`fleetops.rollout.analysis.tail_series`): an SLO's limit, multiples of the baseline's value.
        ``checks``: a rollout's own (its overrides move the SLOs' bounds); the adapter's by default.
        """
        canary = self.variant_stats(endpoint_name, canary_variant, start, end)
        baseline = self.variant_stats(endpoint_name, baseline_variant, start, end)
        tails = tail_series(checks or self._checks, baseline)
        if not tails:
            return canary, baseline
        more = [self.variant_stats(endpoint_name, v.variant_name, start, end, tails) for v in (canary, baseline)]
        return tuple(  # type: ignore[return-value]
            v.model_copy(update={"values": v.values | m.values}) for v, m in zip((canary, baseline), more, strict=True)
        )
