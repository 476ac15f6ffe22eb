"""A variant's own demand history: SageMaker's per-variant ``Invocations`` from CloudWatch, five minutes a point."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetops.aws import clients
from fleetops.metrics import SAGEMAKER_INVOCATIONS, SAGEMAKER_NAMESPACE, Dimension
from fleetops.prescale.forecast import SLOT, SLOT_S, DemandSeries, floor_slot

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
    """Reads ``AWS/SageMaker`` ``Invocations`` (Sum, 5-minute periods) of one variant with GetMetricData."""

    def __init__(self, client: CloudWatchClient | None = None) -> None:
        self._client = client or clients.client("cloudwatch")

    def invocations(self, endpoint_name: str, variant_name: str, start: datetime, end: datetime) -> DemandSeries:
        """The variant's requests/s per whole slot of ``[start, end)`` (only slots that ended by ``end``)."""
        first, last = floor_slot(start), floor_slot(end)
        kwargs: dict[str, Any] = {
            "MetricDataQueries": [
                {
                    "Id": "invocations",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": SAGEMAKER_NAMESPACE,
                            "MetricName": SAGEMAKER_INVOCATIONS,
                            "Dimensions": [
                                {"Name": Dimension.ENDPOINT, "Value": endpoint_name},
                                {"Name": Dimension.VARIANT, "Value": variant_name},
                            ],
                        },
                        "Period": SLOT_S,
                        "Stat": "Sum",
                    },
                    "ReturnData": True,
                }
            ],
            "StartTime": first,
            "EndTime": last,
            "ScanBy": "TimestampAscending",
        }
        sums: dict[datetime, float] = {}
        while True:
            page = self._client.get_metric_data(**kwargs)
            for result in page["MetricDataResults"]:
                for at, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=True):
                    sums[at] = sums.get(at, 0.0) + value
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
        return series_from_sums(first, last, sums)
