"""DynamoDB adapter for pending approvals: store once; claim, then complete or release (conditional writes)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from fleetops.aws.retry import condition_failed
from fleetops.rollout.approval import CLAIM_SECONDS, ApprovalRecord, Decision, check_usable
from fleetops.rollout.request_records import RequestRecordTable, plain
from fleetops.tables import APPROVAL_PK

if TYPE_CHECKING:
    from boto3.dynamodb.conditions import ConditionBase


class ApprovalTable(RequestRecordTable):
    """The approval table: pending approvals, and (inherited) the rollout request records the approvals check."""

    def put(self, record: ApprovalRecord) -> None:
        """Store a new pending approval; an existing key is never overwritten."""
        item = {k: v for k, v in record.model_dump(mode="json").items() if v is not None}
        self._table.put_item(
            Item=item,
            ConditionExpression="attribute_not_exists(#k)",
            ExpressionAttributeNames={"#k": APPROVAL_PK},
        )

    def decisions(self, execution_id: str, step_weight: int) -> list[ApprovalRecord]:
        """The approvals execution ``execution_id`` asked for at ``step_weight`` (one, unless it was retried)."""
        from boto3.dynamodb.conditions import Attr  # here: boto3 stays out of the handlers' cold import

        return self._scan(Attr("execution_id").eq(execution_id) & Attr("step_weight").eq(step_weight))

    def pending(self, rollout_id: str) -> list[ApprovalRecord]:
        """The undecided (pending or claimed) approvals of ``rollout_id``, latest expiry first.

        A rollout waits at one step at a time, so the first is the one it waits at.
        """
        from boto3.dynamodb.conditions import Attr

        found = self._scan(Attr("rollout_id").eq(rollout_id) & Attr("status").is_in(["pending", "claimed"]))
        return sorted(found, key=lambda record: record.expires_at, reverse=True)

    def _scan(self, condition: ConditionBase) -> list[ApprovalRecord]:
        found: list[ApprovalRecord] = []
        kwargs: dict[str, Any] = {"FilterExpression": condition, "ConsistentRead": True}
        while True:
            page = self._table.scan(**kwargs)
            found += [ApprovalRecord.model_validate(plain(item)) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def get(self, key: str) -> ApprovalRecord | None:
        item = self._table.get_item(Key={APPROVAL_PK: key}, ConsistentRead=True).get("Item")
        return ApprovalRecord.model_validate(plain(item)) if item else None

    def claim(self, key: str, decision: Decision, decided_by: str, now: datetime) -> ApprovalRecord:
        """Record ``decided_by``'s ``decision`` as being sent and return the approval (with its task token).

        One conditional update does it, so two approvers cannot both send. The same caller may claim again
        with the same decision (a retry after a failed send), anyone may once a claim has lapsed.

        Raises
        ------
        ApprovalRefusedError
            Unknown, already used, expired or claimed by another (the reason is read back after a lost condition).
        """
        at = int(now.timestamp())
        try:
            result = self._table.update_item(
                Key={APPROVAL_PK: key},
                UpdateExpression="SET #s = :claimed, decision = :d, decided_by = :by, claimed_until = :until",
                ConditionExpression=(
                    "attribute_exists(#k) AND expires_at > :now AND (#s = :pending OR (#s = :claimed AND "
                    "(claimed_until <= :now OR (decided_by = :by AND decision = :d))))"
                ),
                ExpressionAttributeNames={"#k": APPROVAL_PK, "#s": "status"},
                ExpressionAttributeValues={
                    ":claimed": "claimed",
                    ":pending": "pending",
                    ":d": decision,
                    ":by": decided_by,
                    ":now": at,
                    ":until": at + CLAIM_SECONDS,
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            check_usable(self.get(key), now, decided_by, decision)  # raises with the precise reason
            raise  # pragma: no cover - the condition failed, so check_usable always raises
        return ApprovalRecord.model_validate(plain(result["Attributes"]))

    def release(self, key: str, decided_by: str) -> None:
        """Give ``decided_by``'s claim back (Step Functions did not take the decision): others may decide."""
        try:
            self._table.update_item(
                Key={APPROVAL_PK: key},
                UpdateExpression="SET #s = :pending REMOVE decision, decided_by, claimed_until",
                ConditionExpression="#s = :claimed AND decided_by = :by",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":claimed": "claimed", ":pending": "pending", ":by": decided_by},
            )
        except ClientError as exc:
            if not condition_failed(exc):  # not ours any more (lapsed and claimed again): nothing to give back
                raise

    def complete(self, key: str, decision: Decision, decided_by: str, now: datetime) -> None:
        """Mark the approval used: Step Functions has accepted ``decided_by``'s decision, so this is the truth."""
        self._table.update_item(
            Key={APPROVAL_PK: key},
            UpdateExpression="SET #s = :used, decision = :d, decided_by = :by, decided_at = :at REMOVE claimed_until",
            ConditionExpression="attribute_exists(#k)",
            ExpressionAttributeNames={"#k": APPROVAL_PK, "#s": "status"},
            ExpressionAttributeValues={":used": "used", ":d": decision, ":by": decided_by, ":at": now.isoformat()},
        )
