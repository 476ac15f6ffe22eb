"""DynamoDB adapter for the audit trail."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from fleetops.audit import AuditRecord, record_id_time
from fleetops.aws import clients
from fleetops.aws.retry import condition_failed
from fleetops.tables import AUDIT_PK, AUDIT_SK

if TYPE_CHECKING:
    from datetime import datetime

    from mypy_boto3_dynamodb import DynamoDBServiceResource


class AuditRecordConflictError(Exception):
    """A different record already holds this record's key; the trail keeps the first and refuses the second."""


class AuditTable:
    def __init__(self, table_name: str, resource: DynamoDBServiceResource | None = None):
        self._table = (resource or clients.dynamodb_resource()).Table(table_name)

    def write(self, record: AuditRecord) -> AuditRecord:
        """Append the record; before/after are kept as JSON text so any shape round-trips exactly.

        The trail is append-only: the put is conditional on the key being new, so nothing ever overwrites a
        record (the stack's roles have PutItem and nothing else on the table). Writing the same record again (a
        retry after a lost answer) finds itself and succeeds; a different record under the same key raises
        ``AuditRecordConflictError``.
        """
        record = record.with_id()
        item: dict[str, Any] = {
            **record.model_dump(mode="json", exclude={"before", "after"}),
            AUDIT_PK: record.endpoint_name,
            AUDIT_SK: record.record_id,
            "before": json.dumps(record.before, sort_keys=True),
            "after": json.dumps(record.after, sort_keys=True),
        }
        try:
            self._table.put_item(
                Item=item,
                ConditionExpression=_attr(AUDIT_SK).not_exists(),
                # The existing record comes back with the refusal: compared without a read permission.
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            stored = cast("dict[str, Any]", exc.response.get("Item") or {})  # present with ALL_OLD
            from boto3.dynamodb.types import TypeDeserializer

            existing = {k: TypeDeserializer().deserialize(v) for k, v in stored.items()}
            if existing != item:
                raise AuditRecordConflictError(
                    f"audit record {record.endpoint_name}/{record.record_id} already exists with other content; "
                    "the trail keeps the first record and never overwrites it"
                ) from exc
        return record

    def append_once(self, record: AuditRecord) -> bool:
        """Append ``record`` under its own ``record_id`` unless that key is taken; ``True`` when it was new.

        For a finding reported once per period (a record id made from the period and what it is about): the
        second run of the period finds the key and learns, without a read permission, that it was reported.
        """
        try:
            self.write(record)
        except AuditRecordConflictError:
            return False
        return True

    def list(self, endpoint_name: str, since: datetime | None = None) -> list[AuditRecord]:
        """Every record of an endpoint (at or after ``since``: read from there by the sort key), oldest first."""
        records: list[AuditRecord] = []
        from boto3.dynamodb.conditions import Key

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


def _attr(name: str) -> Any:
    from boto3.dynamodb.conditions import Attr  # at the first write: boto3 stays out of the handler's cold import

    return Attr(name)
