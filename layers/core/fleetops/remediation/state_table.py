"""The responder's safety-rail memory per endpoint: last scale-out and recent fleet changes (DynamoDB)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from fleetops.aws import clients
from fleetops.remediation.decide import RailState
from fleetops.remediation.models import ActionType
from fleetops.tables import REMEDIATION_STATE_PK

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

_WINDOW = timedelta(hours=1)  # only the rolling hour matters to the rate limit


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


def _from_epoch(value: str) -> datetime:
    return datetime.fromtimestamp(int(value), tz=UTC)


class RemediationStateStore:
    """One item per endpoint: ``last_scale_out_at`` and ``action_times`` (epoch seconds, last hour only).

    Written only by the responder while it holds the endpoint lease (scale-out) or right after a
    rollback start, so a plain read-modify-write is enough.

    Examples
    --------
    >>> class DynamoDB:  # in-memory stand-in for the two calls made: one item per key
    ...     def __init__(self):
    ...         self.items = {}
    ...     def put_item(self, TableName, Item):
    ...         self.items[Item[REMEDIATION_STATE_PK]["S"]] = Item
    ...     def get_item(self, TableName, Key, ConsistentRead):
    ...         found = self.items.get(Key[REMEDIATION_STATE_PK]["S"])
    ...         return {"Item": found} if found else {}
    >>> store = RemediationStateStore("remediation-state", client=DynamoDB())
    >>> at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
    >>> store.record("manga-chat", ActionType.ROLLBACK, at - timedelta(hours=2)).last_scale_out_at is None
    True
    >>> _ = store.record("manga-chat", ActionType.SCALE_OUT, at)
    >>> state = store.get("manga-chat")  # the rollback two hours ago has left the rolling hour
    >>> state.last_scale_out_at == at, len(state.recent_actions)
    (True, 1)
    """

    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._client: DynamoDBClient = client or clients.client("dynamodb")

    def get(self, endpoint_name: str) -> RailState:
        item = self._client.get_item(
            TableName=self._table,
            Key={REMEDIATION_STATE_PK: {"S": endpoint_name}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return RailState()
        last = item.get("last_scale_out_at", {}).get("N")
        times = tuple(_from_epoch(v["N"]) for v in item.get("action_times", {}).get("L", []))
        return RailState(last_scale_out_at=_from_epoch(last) if last else None, recent_actions=times)

    def record(self, endpoint_name: str, action: ActionType, at: datetime) -> RailState:
        """Remember one applied fleet change at ``at`` (the event's time); returns the new state."""
        current = self.get(endpoint_name)
        times = [t for t in current.recent_actions if t > at - _WINDOW] + [at]
        last = at if action == ActionType.SCALE_OUT else current.last_scale_out_at
        item: dict[str, AttributeValueTypeDef] = {
            REMEDIATION_STATE_PK: {"S": endpoint_name},
            "action_times": {"L": [{"N": _epoch(t)} for t in times]},
        }
        if last is not None:
            item["last_scale_out_at"] = {"N": _epoch(last)}
        self._client.put_item(TableName=self._table, Item=item)
        return RailState(last_scale_out_at=last, recent_actions=tuple(times))
