"""Per-endpoint writer lease: one automated writer at a time per SageMaker endpoint.

SageMaker rejects a change while an endpoint is updating ("Cannot update in-progress endpoint"), and
two writers (reconciler, responder, rollout, rollback) changing capacity at once would undo each
other. Every writer first takes a short lease with a conditional write to the lease table; a writer
that cannot get it defers and says who holds it. Leases expire on their own (``expires_at``, epoch
seconds, also the table's TTL attribute), so a crashed writer blocks nobody for longer than its TTL.

Lease times come from this machine's clock at the moment of the write, never from the caller's event: a late
retry of an old alarm event must neither take a lease that is still live nor plant one that is already stale.
Every take adds one to the row's fencing token (``fence``); the workflows check holder and token right before
each change they make, so a rollout whose lease a rollback took over stops instead of changing traffic.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from fleetops.aws import clients
from fleetops.aws.retry import error_code
from fleetops.endpoint import LeaseInfo
from fleetops.tables import (
    LEASE_EXECUTION_ARN,
    LEASE_EXPIRES_AT,
    LEASE_FENCE,
    LEASE_HOLDER,
    LEASE_PK,
    LEASE_RESTORE_POINTER,
    LEASE_RETURN_CONFIG,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from mypy_boto3_dynamodb import DynamoDBClient

_CONDITION_FAILED = "ConditionalCheckFailedException"


class LeaseHeldError(RuntimeError):
    """Another writer holds the endpoint's lease; the caller should defer.

    Attributes
    ----------
    endpoint_name, holder, expires_at
        The endpoint, the current holder (``None`` if it could not be read) and when its lease ends
        (epoch seconds, ``None`` if unknown).

    Examples
    --------
    >>> print(LeaseHeldError("manga-chat", "prescale/2026-11-21T07:00Z", 1795244700))
    endpoint 'manga-chat' is leased by prescale/2026-11-21T07:00Z until 2026-11-21T07:05:00+00:00
    >>> print(LeaseHeldError("manga-chat", None, None))
    endpoint 'manga-chat' is leased by another writer
    """

    def __init__(self, endpoint_name: str, holder: str | None, expires_at: int | None) -> None:
        self.endpoint_name = endpoint_name
        self.holder = holder
        self.expires_at = expires_at
        who = holder or "another writer"
        until = f" until {datetime.fromtimestamp(expires_at, tz=UTC).isoformat()}" if expires_at is not None else ""
        super().__init__(f"endpoint {endpoint_name!r} is leased by {who}{until}")


class EndpointLease:
    """Conditional-write lease on the lease table (keys from :mod:`fleetops.tables`).

    Parameters
    ----------
    table_name
        The lease table (template resource ``LeaseTable``, env ``LEASE_TABLE``).
    client
        A DynamoDB client; ``None`` builds a default one (reaches the emulator through ``AWS_ENDPOINT_URL``).

    Throttling is botocore's own retry; a lost condition is an answer, never retried.

    Examples
    --------
    What it guards is DynamoDB's conditional write, so the use is shown rather than run
    (``tests/integration/remediation/test_lease.py`` runs it against the emulator)::

        lease = EndpointLease("lease-table")
        lease.acquire("manga-chat", "prescale/2026-11-21T07:00Z", ttl_s=300)  # True: taken
        lease.acquire("manga-chat", "alarm-responder/abc", ttl_s=120)  # False: held by prescale
        lease.current("manga-chat").holder  # 'prescale/2026-11-21T07:00Z'
        lease.release("manga-chat", "prescale/2026-11-21T07:00Z")  # True: given back
        try:
            with lease.hold("manga-chat", "alarm-responder/abc", ttl_s=120):
                autoscaling.set_capacity("manga-chat", "primary", 6, 12)
        except LeaseHeldError as exc:
            print(f"deferred: {exc}")
    """

    def __init__(
        self, table_name: str, client: DynamoDBClient | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.table_name = table_name
        self._client: DynamoDBClient = client or clients.client("dynamodb")
        # Epoch seconds; a parameter only so a test can stand in a clock that has moved on (expiry).
        self._clock = clock

    def acquire(self, endpoint_name: str, holder: str, ttl_s: int) -> bool:
        """Take or renew the lease for ``ttl_s`` seconds from now; ``False`` when another holder's is still live.

        The same holder may re-acquire (renew) its own lease. "Now" is the wall clock at the write (see the
        module docstring). A take replaces the whole row: a workflow's execution, return config and pointer
        from an earlier holder do not survive it.
        """
        if ttl_s <= 0:
            raise ValueError(f"lease ttl_s must be positive, got {ttl_s}")
        now_s = int(self._clock())
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={LEASE_PK: {"S": endpoint_name}},
                UpdateExpression="SET #holder = :holder, #exp = :exp, #fence = if_not_exists(#fence, :zero) + :one "
                "REMOVE #exec, #ret, #ptr",
                ConditionExpression="attribute_not_exists(#pk) OR #exp < :now OR #holder = :holder",
                ExpressionAttributeNames={
                    "#pk": LEASE_PK,
                    "#exp": LEASE_EXPIRES_AT,
                    "#holder": LEASE_HOLDER,
                    "#fence": LEASE_FENCE,
                    "#exec": LEASE_EXECUTION_ARN,
                    "#ret": LEASE_RETURN_CONFIG,
                    "#ptr": LEASE_RESTORE_POINTER,
                },
                ExpressionAttributeValues={
                    ":now": {"N": str(now_s)},
                    ":exp": {"N": str(now_s + ttl_s)},
                    ":holder": {"S": holder},
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                },
            )
        except ClientError as exc:
            if error_code(exc) == _CONDITION_FAILED:
                return False
            raise
        return True

    def release(self, endpoint_name: str, holder: str) -> bool:
        """Give the lease back; ``False`` (and no change) when someone else holds it now."""
        try:
            self._client.delete_item(
                TableName=self.table_name,
                Key={LEASE_PK: {"S": endpoint_name}},
                ConditionExpression="#holder = :holder",
                ExpressionAttributeNames={"#holder": LEASE_HOLDER},
                ExpressionAttributeValues={":holder": {"S": holder}},
            )
        except ClientError as exc:
            if error_code(exc) == _CONDITION_FAILED:
                return False
            raise
        return True

    def current(self, endpoint_name: str) -> LeaseInfo | None:
        """The stored lease row (possibly expired), or ``None`` when there is none."""
        item = self._client.get_item(
            TableName=self.table_name,
            Key={LEASE_PK: {"S": endpoint_name}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        return LeaseInfo(
            endpoint_name=endpoint_name,
            holder=item[LEASE_HOLDER]["S"],
            expires_at=int(item[LEASE_EXPIRES_AT]["N"]),
            execution_arn=item.get(LEASE_EXECUTION_ARN, {}).get("S") or None,
            return_config=item.get(LEASE_RETURN_CONFIG, {}).get("S") or None,
            restore_pointer=item.get(LEASE_RESTORE_POINTER, {}).get("S") or None,
            fence=int(item.get(LEASE_FENCE, {}).get("N", "0")),
        )

    @contextmanager
    def hold(self, endpoint_name: str, holder: str, ttl_s: int) -> Iterator[None]:
        """Hold the lease for the ``with`` block and release it afterwards (also on error).

        Raises
        ------
        LeaseHeldError
            When another writer holds an unexpired lease; names that holder.
        """
        if not self.acquire(endpoint_name, holder, ttl_s):
            info = self.current(endpoint_name)
            raise LeaseHeldError(
                endpoint_name,
                info.holder if info else None,
                info.expires_at if info else None,
            )
        try:
            yield
        finally:
            self.release(endpoint_name, holder)
