"""The per-endpoint writer leases against DynamoDB on the moto server (conditional writes for real)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import boto3
import pytest

from fleetops.aws.lease import EndpointLease, LeaseHeldError, LeaseScope
from fleetops.tables import LEASE_PK

NOW = datetime(2026, 11, 21, 19, 0, tzinfo=UTC)


class MovableClock:
    """Test double for the wall clock (epoch seconds) that the test moves on, so expiry needs no sleeping."""

    def __init__(self, at: datetime) -> None:
        self.now = at.timestamp()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def create_lease_table() -> None:
    boto3.client("dynamodb").create_table(
        TableName="leases",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": LEASE_PK, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": LEASE_PK, "KeyType": "HASH"}],
    )


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock(NOW)


@pytest.fixture
def lease(clock: MovableClock) -> EndpointLease:
    client = boto3.client("dynamodb")
    create_lease_table()
    return EndpointLease("leases", client=client, clock=clock)


def test_second_writer_is_refused_until_the_lease_expires(lease: EndpointLease, clock: MovableClock) -> None:
    assert lease.acquire("manga-chat", "prescale/run-1", ttl_s=120) is True
    clock.advance(60)
    assert lease.acquire("manga-chat", "alarm_responder/a1", ttl_s=120) is False
    # another endpoint is independent
    assert lease.acquire("manga-chat-jp", "alarm_responder/a1", ttl_s=120) is True
    # after expiry the lease is free again
    clock.advance(61)
    assert lease.acquire("manga-chat", "alarm_responder/a1", ttl_s=120) is True
    current = lease.current("manga-chat")
    assert current is not None
    assert current.holder == "alarm_responder/a1"
    assert current.expires_at == int(NOW.timestamp()) + 121 + 120


def test_holder_can_renew_and_only_the_holder_can_release(lease: EndpointLease, clock: MovableClock) -> None:
    assert lease.acquire("manga-chat", "rollout/exec-1", ttl_s=60)
    clock.advance(30)
    assert lease.acquire("manga-chat", "rollout/exec-1", ttl_s=60)
    assert lease.release("manga-chat", "prescale/run-1") is False
    assert lease.current("manga-chat") is not None
    assert lease.release("manga-chat", "rollout/exec-1") is True
    assert lease.current("manga-chat") is None


def test_hold_names_the_current_holder_and_releases_on_error(lease: EndpointLease) -> None:
    assert lease.acquire("manga-chat", "rollback/exec-9", ttl_s=300)
    with (
        pytest.raises(
            LeaseHeldError, match=r"'manga-chat': config lease held by rollback/exec-9 until 2026-11-21T19:05:00"
        ) as info,
        lease.hold("manga-chat", "alarm_responder/a1", ttl_s=120),
    ):
        pytest.fail("must not enter the block without the lease")
    assert info.value.holder == "rollback/exec-9"

    with (
        pytest.raises(RuntimeError, match="boom"),
        lease.hold("manga-chat-jp", "alarm_responder/a1", ttl_s=120),
    ):
        assert lease.current("manga-chat-jp") is not None
        raise RuntimeError("boom")
    assert lease.current("manga-chat-jp") is None


def test_non_positive_ttl_is_rejected(lease: EndpointLease) -> None:
    with pytest.raises(ValueError, match="ttl_s must be positive"):
        lease.acquire("manga-chat", "x", ttl_s=0)


def test_lease_times_come_from_the_wall_clock_at_the_write() -> None:
    """No caller-supplied time: a late retry of an old event neither takes a live lease nor plants a stale one."""
    create_lease_table()
    lease = EndpointLease("leases")  # the real clock
    before = int(time.time())
    assert lease.acquire("manga-chat", "alarm_responder/old-event", ttl_s=120)
    current = lease.current("manga-chat")
    assert current is not None and before + 120 <= current.expires_at <= int(time.time()) + 120


def test_every_take_raises_the_fencing_token_and_drops_the_previous_holders_workflow_fields(
    lease: EndpointLease, clock: MovableClock
) -> None:
    assert lease.acquire("manga-chat", "prescale/run-1", ttl_s=60)
    first = lease.current("manga-chat")
    assert first is not None and first.fence == 1
    boto3.client("dynamodb").update_item(  # as the rollout's AcquireLease leaves its row
        TableName="leases",
        Key={LEASE_PK: {"S": "manga-chat"}},
        UpdateExpression="SET execution_arn = :e, return_config = :c",
        ExpressionAttributeValues={":e": {"S": "arn:exec"}, ":c": {"S": "v6-config"}},
    )
    clock.advance(61)
    assert lease.acquire("manga-chat", "alarm_responder/a1", ttl_s=60)
    second = lease.current("manga-chat")
    assert second is not None and second.fence == 2
    assert (second.execution_arn, second.return_config) == (None, None)


def test_config_and_capacity_are_two_leases_each_exclusive_and_fenced_on_its_own(lease: EndpointLease) -> None:
    capacity = LeaseScope.CAPACITY
    assert lease.acquire("manga-chat", "canary_rollout/v7", ttl_s=7 * 24 * 3600)  # the config lease, for a week
    # A capacity writer is not held up by the rollout; a second capacity writer is, by the first.
    assert lease.acquire("manga-chat", "prescale/run-1", ttl_s=120, scope=capacity) is True
    assert lease.acquire("manga-chat", "alarm_responder/a1", ttl_s=120, scope=capacity) is False
    # A config writer still waits for the rollout.
    assert lease.acquire("manga-chat", "rollback/r1", ttl_s=600) is False
    with (
        pytest.raises(LeaseHeldError, match="'manga-chat': capacity lease held by prescale/run-1") as info,
        lease.hold("manga-chat", "alarm_responder/a1", ttl_s=120, scope=capacity),
    ):
        pytest.fail("must not enter the block without the capacity lease")
    assert info.value.scope is capacity

    config, held = lease.current("manga-chat"), lease.current("manga-chat", scope=capacity)
    assert config is not None and (config.holder, config.fence) == ("canary_rollout/v7", 1)
    assert held is not None and (held.endpoint_name, held.holder, held.fence) == ("manga-chat", "prescale/run-1", 1)
    # Each is given back on its own, by its own holder only.
    assert lease.release("manga-chat", "prescale/run-1") is False  # the config lease is not prescale's
    assert lease.release("manga-chat", "prescale/run-1", scope=capacity) is True
    assert lease.current("manga-chat", scope=capacity) is None
    assert lease.current("manga-chat") == config
    # The config lease is the row keyed by the endpoint name itself: the one the workflows' ASL takes and checks.
    rows = boto3.client("dynamodb").scan(TableName="leases")["Items"]
    assert [row[LEASE_PK]["S"] for row in rows] == ["manga-chat"]
