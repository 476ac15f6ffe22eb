"""DynamoDB adapter for pending approvals: store once, consume exactly once (conditional writes)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Attr
from botocore.exceptions import ClientError

from fleetops.aws import clients
from fleetops.aws.retry import error_code
from fleetops.rollout.approval import ApprovalRecord, Decision, check_usable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBServiceResource

#: Partition key of the approval table (template resource ``ApprovalTable``); TTL attribute ``expires_at``.
APPROVAL_PK = "approval_key"


def _condition_failed(exc: ClientError) -> bool:
    return error_code(exc) == "ConditionalCheckFailedException"


class ApprovalTable:
    def __init__(self, table_name: str, resource: DynamoDBServiceResource | None = None) -> None:
        self._table = (resource or clients.dynamodb_resource()).Table(table_name)

    def put(self, record: ApprovalRecord) -> None:
        """Store a new pending approval; an existing key is never overwritten."""
        item = {k: v for k, v in record.model_dump(mode="json").items() if v is not None}
        self._table.put_item(
            Item=item,
            ConditionExpression="attribute_not_exists(#k)",
            ExpressionAttributeNames={"#k": APPROVAL_PK},
        )

    def pending(self, rollout_id: str) -> list[ApprovalRecord]:
        """The pending approvals of ``rollout_id``, latest expiry first (a rollout waits at one step at a time)."""
        found: list[ApprovalRecord] = []
        kwargs: dict[str, Any] = {
            "FilterExpression": Attr("rollout_id").eq(rollout_id) & Attr("status").eq("pending"),
            "ConsistentRead": True,
        }
        while True:
            page = self._table.scan(**kwargs)
            found += [ApprovalRecord.model_validate(_plain(item)) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                return sorted(found, key=lambda record: record.expires_at, reverse=True)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def get(self, key: str) -> ApprovalRecord | None:
        item = self._table.get_item(Key={APPROVAL_PK: key}, ConsistentRead=True).get("Item")
        return ApprovalRecord.model_validate(_plain(item)) if item else None

    def consume(self, key: str, decision: Decision, decided_by: str, now: datetime) -> ApprovalRecord:
        """Mark the approval used by ``decided_by`` and return it (with its task token).

        One conditional update does it, so two concurrent submissions cannot both succeed.

        Raises
        ------
        ApprovalRefusedError
            Unknown, already used or expired (the reason is read back after a lost condition).
        """
        try:
            result = self._table.update_item(
                Key={APPROVAL_PK: key},
                UpdateExpression="SET #s = :used, decision = :d, decided_by = :by, decided_at = :at",
                ConditionExpression="attribute_exists(#k) AND #s = :pending AND expires_at > :now",
                ExpressionAttributeNames={"#k": APPROVAL_PK, "#s": "status"},
                ExpressionAttributeValues={
                    ":used": "used",
                    ":pending": "pending",
                    ":d": decision,
                    ":by": decided_by,
                    ":at": now.isoformat(),
                    ":now": int(now.timestamp()),
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            check_usable(self.get(key), now)  # raises with the precise reason
            raise  # pragma: no cover - the condition failed, so check_usable always raises
        return ApprovalRecord.model_validate(_plain(result["Attributes"]))


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    # The resource API returns numbers as Decimal.
    return {k: (int(v) if type(v).__name__ == "Decimal" else v) for k, v in item.items()}
