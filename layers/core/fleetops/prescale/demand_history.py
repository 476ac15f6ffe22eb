"""A variant's own history from CloudWatch: SageMaker's per-variant ``Invocations``, five minutes a point (the
forecast's demand), and what its instances served while requests queued, a minute a point (the rate per instance)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetops.aws import clients
from fleetops.metrics import (
    NAMESPACE,
    SAGEMAKER_INVOCATIONS,
    SAGEMAKER_INVOCATIONS_PER_INSTANCE,
    SAGEMAKER_NAMESPACE,
    Dimension,
    MetricName,
)
from fleetops.prescale.forecast import SLOT, SLOT_S, DemandSeries, floor_slot
from fleetops.prescale.served_capacity import MINUTE, MinuteLoad

#: The served rate's period: its neighbouring minutes, across which a queue's growth is read, are this far apart.
MINUTE_S = int(MINUTE.total_seconds())

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient


def series_from_sums(start: datetime, end: datetime, sums: dict[datetime, float]) -> DemandSeries:
    """Requests/s per slot of ``[start, end)`` from per-slot request sums.

    CloudWatch returns no datapoint for a period without invocations, so a slot after the first datapoint with
    none reads 0; slots before it read ``None`` (the endpoint was not serving yet, or the history ends there).

    Examples
    --------
    >>> from datetime import UTC
    >>> t0 = datetime(2026, 12, 4, tzinfo=UTC)
    >>> series_from_sums(t0, t0 + 4 * SLOT, {t0 + SLOT: 600.0, t0 + 3 * SLOT: 300.0}).rps
    (None, 2.0, 0.0, 1.0)
    """
    first_slot, last_slot = floor_slot(start), floor_slot(end)
    count = int((last_slot - first_slot) / SLOT)
    by_slot = {floor_slot(at): total for at, total in sums.items()}
    first_seen = min((at for at in by_slot if first_slot <= at < last_slot), default=None)
    rps: list[float | None] = []
    for i in range(count):
        slot = first_slot + i * SLOT
        if first_seen is None or slot < first_seen:
            rps.append(None)
        else:
            rps.append(by_slot.get(slot, 0.0) / SLOT_S)
    return DemandSeries(first_slot, tuple(rps))


class DemandHistory:
    """Reads one variant's metrics with GetMetricData."""

    def __init__(self, client: CloudWatchClient | None = None) -> None:
        self._client = client or clients.client("cloudwatch")

    def invocations(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> DemandSeries:
        """The variant's requests/s per whole slot of ``[start, end)`` (only slots that ended by ``end``)."""
        first, last = floor_slot(start), floor_slot(end)
        query = _query("invocations", SAGEMAKER_NAMESPACE, SAGEMAKER_INVOCATIONS, "Sum", SLOT_S)
        sums = self._read([query], endpoint_name, variant_name, first, last)["invocations"]
        return series_from_sums(first, last, sums)

    def minute_loads(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> list[MinuteLoad]:
        """Each minute of ``[start, end)`` with both SageMaker's ``InvocationsPerInstance`` (Sum) and the container's
        ``QueueDepth`` (Average: vLLM's requests waiting, per instance): what the instances served."""
        queries = [
            _query("perinstance", SAGEMAKER_NAMESPACE, SAGEMAKER_INVOCATIONS_PER_INSTANCE, "Sum", MINUTE_S),
            _query("queue", NAMESPACE, MetricName.QUEUE_DEPTH, "Average", MINUTE_S),
        ]
        read = self._read(queries, endpoint_name, variant_name, _minute(start), _minute(end))
        per_instance, queue = read["perinstance"], read["queue"]
        return [MinuteLoad(at, per_instance[at] / MINUTE_S, queue[at]) for at in sorted(per_instance) if at in queue]

    def _read(
        self, queries: list[dict[str, Any]], endpoint_name: str, variant_name: str, first: datetime, last: datetime
    ) -> dict[str, dict[datetime, float]]:
        """Every query's value per period start, for one variant, over all of GetMetricData's pages."""
        dimensions = [
            {"Name": Dimension.ENDPOINT, "Value": endpoint_name},
            {"Name": Dimension.VARIANT, "Value": variant_name},
        ]
        for query in queries:
            query["MetricStat"]["Metric"]["Dimensions"] = dimensions
        kwargs: dict[str, Any] = {
            "MetricDataQueries": queries,
            "StartTime": first,
            "EndTime": last,
            "ScanBy": "TimestampAscending",
        }
        values: dict[str, dict[datetime, float]] = {q["Id"]: {} for q in queries}
        while True:
            page = self._client.get_metric_data(**kwargs)
            for result in page["MetricDataResults"]:
                found = values[result["Id"]]
                for at, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=True):
                    found[at] = value
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
        return values


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _query(query_id: str, namespace: str, metric: str, stat: str, period_s: int) -> dict[str, Any]:
    metric_stat = {"Metric": {"Namespace": namespace, "MetricName": metric}, "Period": period_s, "Stat": stat}
    return {"Id": query_id, "MetricStat": metric_stat, "ReturnData": True}
