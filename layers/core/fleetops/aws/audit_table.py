"""DynamoDB adapter for the audit trail."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Key

from fleetops.audit import AuditRecord, record_id_time
from fleetops.aws import clients
from fleetops.tables import AUDIT_PK, AUDIT_SK

if TYPE_CHECKING:
    from datetime import datetime

    from mypy_boto3_dynamodb import DynamoDBServiceResource


class AuditTable:
    def __init__(self, table_name: str, resource: DynamoDBServiceResource | None = None):
        self._table = (resource or clients.dynamodb_resource()).Table(table_name)

    def write(self, record: AuditRecord) -> AuditRecord:
        """Store the record; before/after are kept as JSON text so any shape round-trips exactly."""
        record = record.with_id()
        item: dict[str, Any] = {
            **record.model_dump(mode="json", exclude={"before", "after"}),
            AUDIT_PK: record.endpoint_name,
            AUDIT_SK: record.record_id,
            "before": json.dumps(record.before, sort_keys=True),
            "after": json.dumps(record.after, sort_keys=True),
        }
        self._table.put_item(Item=item)
        return record

    def list(self, endpoint_name: str, since: datetime | None = None) -> list[AuditRecord]:
        """Every record of an endpoint (at or after ``since``: read from there by the sort key), oldest first."""
        records: list[AuditRecord] = []
        endpoint = Key(AUDIT_PK).eq(endpoint_name)
        condition = endpoint if since is None else endpoint & Key(AUDIT_SK).gte(record_id_time(since))
        kwargs: dict[str, Any] = {"KeyConditionExpression": condition}
        while True:
            page = self._table.query(**kwargs)
            for item in page["Items"]:
                data = {**item, "before": json.loads(str(item["before"])), "after": json.loads(str(item["after"]))}
                records.append(AuditRecord.model_validate(data))
            if "LastEvaluatedKey" not in page:
                return records
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
