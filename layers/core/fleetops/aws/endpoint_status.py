"""Wait (bounded, with backoff) until a SageMaker endpoint is ``InService`` before changing it.

SageMaker rejects changes while an endpoint is ``Updating`` or ``SystemUpdating``; writers holding
the endpoint lease call :func:`wait_in_service` first and defer when it does not settle in time.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import boto3
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_exponential

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_sagemaker import SageMakerClient

IN_SERVICE = "InService"
#: States that will not turn into InService by waiting.
TERMINAL = frozenset({"Failed", "OutOfService", "Deleting"})


class EndpointNotReadyError(RuntimeError):
    """The endpoint did not reach InService in time, or is in a state waiting cannot fix."""

    def __init__(self, endpoint_name: str, status: str) -> None:
        self.endpoint_name = endpoint_name
        self.status = status
        super().__init__(f"endpoint {endpoint_name!r} is {status}, not {IN_SERVICE}")


def wait_in_service(
    endpoint_name: str,
    client: SageMakerClient | None = None,
    timeout_s: float = 30.0,
    max_wait_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll ``DescribeEndpoint`` until ``InService``; return the status seen.

    Parameters
    ----------
    endpoint_name
        The SageMaker endpoint.
    client
        A SageMaker client; ``None`` builds a default one.
    timeout_s
        Give up after this long (keep it well inside the Lambda timeout).
    max_wait_s
        Upper bound of one exponential back-off pause.
    sleep
        Injected for tests.

    Raises
    ------
    EndpointNotReadyError
        On a terminal state, or when the endpoint is still not InService after ``timeout_s``.

    Examples
    --------
    >>> wait_in_service("manga-chat", timeout_s=20)  # doctest: +SKIP
    'InService'
    """
    sm: SageMakerClient = client or boto3.client("sagemaker")

    def status() -> str:
        value = sm.describe_endpoint(EndpointName=endpoint_name)["EndpointStatus"]
        if value in TERMINAL:
            raise EndpointNotReadyError(endpoint_name, value)
        return value

    retrying = Retrying(
        retry=retry_if_result(lambda s: s != IN_SERVICE),
        stop=stop_after_delay(timeout_s),
        wait=wait_exponential(multiplier=0.25, max=max_wait_s),
        sleep=sleep,
    )
    try:
        result: str = retrying(status)
    except RetryError as exc:
        last = exc.last_attempt.result() if not exc.last_attempt.failed else "unknown"
        raise EndpointNotReadyError(endpoint_name, str(last)) from exc
    return result
