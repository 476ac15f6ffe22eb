"""Per-endpoint writer leases: one automated writer of the same thing at a time per SageMaker endpoint.

Two writers changing the same thing at once would undo each other, so every writer first takes a lease with a
conditional write to the lease table; a writer that cannot get it defers and says who holds which lease. An
endpoint has two (:class:`LeaseScope`): the ``config`` lease for the endpoint's config and weights (the rollout
and rollback workflows, the responder's canary weight to 0) and the ``capacity`` lease for its variants'
MinCapacity/MaxCapacity and scheduled actions (the pre-scale reconciler, the responder's scale-outs). A rollout
holds the config lease for up to a week; pre-scaling and scale-outs go on beside it, and still exclude each other.
SageMaker's own "Cannot update in-progress endpoint" is not a lease's business: a capacity writer that needs the
endpoint InService waits for it (:func:`fleetops.aws.sagemaker_endpoint.wait_in_service`) and defers otherwise.
Leases expire on their own (``expires_at``, epoch seconds, also the table's TTL attribute), so a crashed writer
blocks nobody for longer than its TTL.

Lease times come from this machine's clock at the moment of the write, never from the caller's event: a late
retry of an old alarm event must neither take a lease that is still live nor plant one that is already stale.
Every take adds one to the row's fencing token (``fence``); the workflows check holder and token right before
each change they make, so a rollout whose lease a rollback took over stops instead of changing traffic.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from fleetops.aws import clients
from fleetops.aws.retry import condition_failed
from fleetops.endpoint import LeaseInfo
from fleetops.tables import (
    LEASE_CAPACITY_SUFFIX,
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


class LeaseScope(StrEnum):
    """What a lease lets its holder change; each scope is a lease of its own.

    ``CONFIG``: UpdateEndpoint, variant weights, promotion, rollback. ``CAPACITY``: the variants' scalable targets
    (MinCapacity/MaxCapacity) and scheduled actions.
    """

    CONFIG = "config"
    CAPACITY = "capacity"


def lease_key(endpoint_name: str, scope: LeaseScope) -> str:
    """The lease row's key (:data:`fleetops.tables.LEASE_PK`) for ``scope`` of an endpoint.

    The config lease is the endpoint name itself: the workflows' ASL keys its lease steps so.

    Examples
    --------
    >>> lease_key("manga-chat", LeaseScope.CONFIG), lease_key("manga-chat", LeaseScope.CAPACITY)
    ('manga-chat', 'manga-chat#capacity')
    """
    return endpoint_name if scope is LeaseScope.CONFIG else f"{endpoint_name}{LEASE_CAPACITY_SUFFIX}"


class LeaseHeldError(RuntimeError):
    """Another writer holds this lease of the endpoint; the caller should defer.

    Attributes
    ----------
    endpoint_name, holder, expires_at, scope
        The endpoint, the current holder (``None`` if it could not be read), when its lease ends (epoch seconds,
        ``None`` if unknown) and which of the endpoint's leases it is.

    Examples
    --------
    >>> print(LeaseHeldError("manga-chat", "prescale/2026-11-21T07:00Z", 1795244700, LeaseScope.CAPACITY))
    endpoint 'manga-chat': capacity lease held by prescale/2026-11-21T07:00Z until 2026-11-21T07:05:00+00:00
    >>> print(LeaseHeldError("manga-chat", None, None))
    endpoint 'manga-chat': config lease held by another writer
    """

    def __init__(
        self, endpoint_name: str, holder: str | None, expires_at: int | None, scope: LeaseScope = LeaseScope.CONFIG
    ) -> None:
        self.endpoint_name = endpoint_name
        self.holder = holder
        self.expires_at = expires_at
        self.scope = scope
        who = holder or "another writer"
        until = f" until {datetime.fromtimestamp(expires_at, tz=UTC).isoformat()}" if expires_at is not None else ""
        super().__init__(f"endpoint {endpoint_name!r}: {scope} lease held by {who}{until}")


class EndpointLease:
    """Conditional-write leases on the lease table (keys from :mod:`fleetops.tables`, via :func:`lease_key`).

    Parameters
    ----------
    table_name
        The lease table (template resource ``LeaseTable``, env ``LEASE_TABLE``).
    client
        A DynamoDB client; ``None`` builds a default one (reaches the emulator through ``AWS_ENDPOINT_URL``).

    Every method takes the lease's ``scope``: the config lease unless told (the one the workflows hold and a
    rollback reads); a capacity writer names ``LeaseScope.CAPACITY``. Throttling is botocore's own retry; a lost
    condition is an answer, never retried.

    Examples
    --------
    What it guards is DynamoDB's conditional write, so the use is shown rather than run
    (``tests/integration/remediation/test_lease.py`` runs it against the emulator)::

        lease, capacity = EndpointLease("lease-table"), LeaseScope.CAPACITY
        lease.acquire("manga-chat", "prescale/2026-11-21T07:00Z", ttl_s=300, scope=capacity)  # True: taken
        lease.acquire("manga-chat", "alarm-responder/abc", ttl_s=120, scope=capacity)  # False: held by prescale
        lease.acquire("manga-chat", "rollback/abc", ttl_s=600)  # True: the config lease is another lease
        lease.current("manga-chat", scope=capacity).holder  # 'prescale/2026-11-21T07:00Z'
        lease.release("manga-chat", "prescale/2026-11-21T07:00Z", scope=capacity)  # True: given back
        try:
            with lease.hold("manga-chat", "alarm-responder/abc", ttl_s=120, scope=capacity):
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

    def acquire(self, endpoint_name: str, holder: str, ttl_s: int, scope: LeaseScope = LeaseScope.CONFIG) -> bool:
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
                Key={LEASE_PK: {"S": lease_key(endpoint_name, scope)}},
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
            if condition_failed(exc):
                return False
            raise
        return True

    def release(self, endpoint_name: str, holder: str, scope: LeaseScope = LeaseScope.CONFIG) -> bool:
        """Give the lease back; ``False`` (and no change) when someone else holds it now."""
        try:
            self._client.delete_item(
                TableName=self.table_name,
                Key={LEASE_PK: {"S": lease_key(endpoint_name, scope)}},
                ConditionExpression="#holder = :holder",
                ExpressionAttributeNames={"#holder": LEASE_HOLDER},
                ExpressionAttributeValues={":holder": {"S": holder}},
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def current(self, endpoint_name: str, scope: LeaseScope = LeaseScope.CONFIG) -> LeaseInfo | None:
        """The stored lease row (possibly expired), or ``None`` when there is none."""
        item = self._client.get_item(
            TableName=self.table_name,
            Key={LEASE_PK: {"S": lease_key(endpoint_name, scope)}},
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
    def hold(
        self, endpoint_name: str, holder: str, ttl_s: int, scope: LeaseScope = LeaseScope.CONFIG
    ) -> Iterator[None]:
        """Hold the lease for the ``with`` block and release it afterwards (also on error).

        Raises
        ------
        LeaseHeldError
            When another writer holds an unexpired lease of this scope; names that holder and the scope.
        """
        if not self.acquire(endpoint_name, holder, ttl_s, scope):
            info = self.current(endpoint_name, scope)
            raise LeaseHeldError(
                endpoint_name,
                info.holder if info else None,
                info.expires_at if info else None,
                scope,
            )
        try:
            yield
        finally:
            self.release(endpoint_name, holder, scope)
