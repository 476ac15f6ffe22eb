"""The remediation state item under concurrent writers: a write conditioned on the version a writer read, retried
when another writer got there first, so neither change is lost."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from fleetops.remediation.actions import ActionType
from fleetops.remediation.state_table import RemediationStateStore, StateConflictError
from fleetops.tables import REMEDIATION_STATE_PK

AT = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
QUEUE = "queue-depth-alarm"


class VersionedDynamoDB:
    """Test double for the two calls made, honouring the store's version condition; ``before_put`` runs once
    between a writer's read and its write (another writer slipping in)."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.before_put: Callable[[], object] | None = None
        self.refused = 0

    def get_item(self, TableName: str, Key: dict[str, Any], ConsistentRead: bool) -> dict[str, Any]:
        found = self.items.get(Key[REMEDIATION_STATE_PK]["S"])
        return {"Item": found} if found else {}

    def put_item(self, TableName: str, Item: dict[str, Any], **condition: Any) -> None:
        interloper, self.before_put = self.before_put, None
        if interloper is not None:
            interloper()
        key = Item[REMEDIATION_STATE_PK]["S"]
        stored = self.items.get(key, {}).get("item_version", {}).get("N")
        expected = condition.get("ExpressionAttributeValues", {}).get(":seen", {}).get("N")
        if stored != expected:
            self.refused += 1
            message = "The conditional request failed"
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException", "Message": message}}, "PutItem")
        self.items[key] = Item


def test_a_clear_written_between_the_rails_read_and_write_is_kept() -> None:
    db = VersionedDynamoDB()
    store = RemediationStateStore("state", client=db)  # type: ignore[arg-type]
    store.record_raise("manga-chat", "primary", QUEUE, 8, AT)
    other = RemediationStateStore("state", client=db)  # type: ignore[arg-type]
    db.before_put = lambda: other.record_clear("manga-chat", "primary", QUEUE, AT + timedelta(minutes=5))

    store.record("manga-chat", ActionType.SCALE_OUT, AT + timedelta(minutes=6))

    assert db.refused == 1  # the first write lost the race and was retried on the fresh item
    (record,) = store.raises("manga-chat")
    assert record.cleared_at == AT + timedelta(minutes=5)
    assert store.get("manga-chat").last_scale_out_at == AT + timedelta(minutes=6)


def test_a_writer_that_never_wins_gives_up_saying_so() -> None:
    db = VersionedDynamoDB()
    store = RemediationStateStore("state", client=db)  # type: ignore[arg-type]

    def always_first() -> None:
        db.items["manga-chat"] = {**db.items.get("manga-chat", {}), "item_version": {"N": str(db.refused + 100)}}
        db.before_put = always_first

    db.before_put = always_first
    with pytest.raises(StateConflictError, match="'manga-chat' kept changing"):
        store.record_raise("manga-chat", "primary", QUEUE, 8, AT)
