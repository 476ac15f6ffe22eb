"""DynamoDB adapter for the calendar table: entries operators add without a deploy (one-off by default)."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from fleetops.aws import clients
from fleetops.tables import CALENDAR_PK

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBServiceResource


def _plain(value: Any) -> Any:
    """DynamoDB numbers come back as Decimal and lists may be sets; the calendar models want plain values."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, set | list | tuple):
        return sorted(_plain(v) for v in value)
    return value


class CalendarTable:
    def __init__(self, table_name: str, resource: DynamoDBServiceResource | None = None):
        self._table = (resource or clients.dynamodb_resource()).Table(table_name)

    def one_off_entries(self) -> list[dict[str, Any]]:
        """Every row as a plain dict for the calendar; ``event_id`` names rows without a ``name``.

        A row of any ``kind`` may live here; one without ``kind`` is a one-off event (all rows were, once).
        """
        return sorted(self.rows_by_id().values(), key=lambda e: str(e["name"]))

    def rows_by_id(self) -> dict[str, dict[str, Any]]:
        """Every row by its ``event_id`` (what operators list and remove), each as :meth:`one_off_entries` gives it."""
        rows: dict[str, dict[str, Any]] = {}
        kwargs: dict[str, Any] = {"ConsistentRead": True}
        while True:
            page = self._table.scan(**kwargs)
            for item in page["Items"]:
                entry = {k: _plain(v) for k, v in item.items() if k != CALENDAR_PK}
                entry.setdefault("name", str(item[CALENDAR_PK]))
                rows[str(item[CALENDAR_PK])] = entry
            if "LastEvaluatedKey" not in page:
                return rows
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def put(self, event_id: str, entry: dict[str, Any]) -> None:
        """Add or replace an entry (used by the demo and tests; operators use the CLI, see README)."""
        item = {CALENDAR_PK: event_id, **{k: Decimal(str(v)) if isinstance(v, float) else v for k, v in entry.items()}}
        self._table.put_item(Item=item)

    def delete(self, event_id: str) -> None:
        self._table.delete_item(Key={CALENDAR_PK: event_id})
