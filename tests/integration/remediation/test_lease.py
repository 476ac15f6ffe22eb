"""The per-endpoint writer lease against DynamoDB on the moto server (conditional writes for real)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest

from fleetops.aws.lease import EndpointLease, LeaseHeldError
from fleetops.tables import LEASE_PK

NOW = datetime(2026, 11, 21, 19, 0, tzinfo=UTC)


@pytest.fixture
def lease() -> EndpointLease:
    client = boto3.client("dynamodb")
    client.create_table(
        TableName="leases",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": LEASE_PK, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": LEASE_PK, "KeyType": "HASH"}],
    )
    return EndpointLease("leases", client=client)


def test_second_writer_is_refused_until_the_lease_expires(lease: EndpointLease) -> None:
    assert lease.acquire("manga-chat", "prescale/run-1", ttl_s=120, now=NOW) is True
    assert lease.acquire("manga-chat", "alarm_responder/a1", ttl_s=120, now=NOW + timedelta(seconds=60)) is False
    # another endpoint is independent
    assert lease.acquire("manga-chat-jp", "alarm_responder/a1", ttl_s=120, now=NOW) is True
    # after expiry the lease is free again
    assert lease.acquire("manga-chat", "alarm_responder/a1", ttl_s=120, now=NOW + timedelta(seconds=121)) is True
    current = lease.current("manga-chat")
    assert current is not None
    assert current.holder == "alarm_responder/a1"
    assert current.expires_at == int(NOW.timestamp()) + 121 + 120


def test_holder_can_renew_and_only_the_holder_can_release(lease: EndpointLease) -> None:
    assert lease.acquire("manga-chat", "rollout/exec-1", ttl_s=60, now=NOW)
    assert lease.acquire("manga-chat", "rollout/exec-1", ttl_s=60, now=NOW + timedelta(seconds=30))
    assert lease.release("manga-chat", "prescale/run-1") is False
    assert lease.current("manga-chat") is not None
    assert lease.release("manga-chat", "rollout/exec-1") is True
    assert lease.current("manga-chat") is None


def test_hold_names_the_current_holder_and_releases_on_error(lease: EndpointLease) -> None:
    assert lease.acquire("manga-chat", "rollback/exec-9", ttl_s=300, now=NOW)
    with (
        pytest.raises(LeaseHeldError, match=r"leased by rollback/exec-9 until 2026-11-21T19:05:00") as info,
        lease.hold("manga-chat", "alarm_responder/a1", ttl_s=120, now=NOW),
    ):
        pytest.fail("must not enter the block without the lease")
    assert info.value.holder == "rollback/exec-9"

    with (
        pytest.raises(RuntimeError, match="boom"),
        lease.hold("manga-chat-jp", "alarm_responder/a1", ttl_s=120, now=NOW),
    ):
        assert lease.current("manga-chat-jp") is not None
        raise RuntimeError("boom")
    assert lease.current("manga-chat-jp") is None


def test_non_positive_ttl_is_rejected(lease: EndpointLease) -> None:
    with pytest.raises(ValueError, match="ttl_s must be positive"):
        lease.acquire("manga-chat", "x", ttl_s=0, now=NOW)
