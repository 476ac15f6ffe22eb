"""DynamoDB adapter for the rollout request records in the approval table (see :mod:`fleetops.rollout.requester`).

The approvals' adapter (:class:`fleetops.rollout.approval_table.ApprovalTable`) extends this one; the request
function only records requests, so it builds none of the approvals' models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from fleetops.aws import clients
from fleetops.aws.retry import condition_failed
from fleetops.rollout.requester import RolloutRecord, rollout_key
from fleetops.tables import APPROVAL_PK

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBServiceResource


def plain(item: dict[str, Any]) -> dict[str, Any]:
    """An item of the resource API with its numbers (``Decimal``) as ints."""
    return {k: (int(v) if type(v).__name__ == "Decimal" else v) for k, v in item.items()}


class RequestRecordTable:
    def __init__(self, table_name: str, resource: DynamoDBServiceResource | None = None) -> None:
        self._table = (resource or clients.dynamodb_resource()).Table(table_name)

    def record_request(self, record: RolloutRecord) -> bool:
        """Store a rollout's request record; a repeat of the same request is fine, another input is not (False)."""
        try:
            self._table.put_item(
                Item=record.model_dump(mode="json"),
                ConditionExpression="attribute_not_exists(#k) OR execution_input = :input",
                ExpressionAttributeNames={"#k": APPROVAL_PK},
                ExpressionAttributeValues={":input": record.execution_input},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def rollout_record(self, execution_name: str) -> RolloutRecord | None:
        """The request record of execution ``execution_name``, if the request function wrote one."""
        item = self._table.get_item(Key={APPROVAL_PK: rollout_key(execution_name)}, ConsistentRead=True).get("Item")
        return RolloutRecord.model_validate(plain(item)) if item else None
