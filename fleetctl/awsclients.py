"""boto3 clients for the services fleetops has no adapter for (and the ones handed to its adapters), built once.

One client per service per process: ``status`` asks a dozen questions and building a client costs more
than a call to the emulator. They use fleetops' client configuration (botocore's standard retry mode) on a
session of fleetctl's own, so that a test can start over with other credentials. boto3 reads region,
credentials and ``AWS_ENDPOINT_URL`` from the environment, as the Lambdas do.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def session() -> Any:
    """fleetctl's own session: region, profile and credentials as the environment says when first asked."""
    import boto3

    return boto3.session.Session()


@cache
def client(service_name: str) -> Any:
    """A client for ``service_name`` (cached for the life of the process), configured as fleetops' own."""
    from fleetops.aws.clients import CONFIG

    return session().client(service_name, config=CONFIG)


@cache
def dynamodb_resource() -> Any:
    """The DynamoDB resource API that fleetops' table adapters take."""
    from fleetops.aws.clients import CONFIG

    return session().resource("dynamodb", config=CONFIG)


def region() -> str | None:
    """The region the clients use (``AWS_REGION``, ``AWS_DEFAULT_REGION`` or the profile's), or ``None``."""
    name: str | None = session().region_name
    return name


def reset() -> None:
    """Forget the session and its clients (tests change credentials and the emulator between runs)."""
    session.cache_clear()
    client.cache_clear()
    dynamodb_resource.cache_clear()
