"""Retries for AWS calls: throttling and "endpoint is updating" are waited out, everything else fails at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from botocore.exceptions import ClientError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

T = TypeVar("T")

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "SlowDown",
    }
)
TRANSIENT_CODES = frozenset(
    {"ConcurrentUpdateException", "ServiceUnavailable", "InternalFailure", "InternalServerError"}
)
# SageMaker answers a change to an endpoint that is still updating with a ValidationException whose
# only distinguishing mark is its message ("Cannot update in-progress endpoint ...").
_UPDATING_MARKERS = ("in-progress endpoint", "is in updating", "status updating", "endpoint is updating")


def error_code(exc: BaseException) -> str:
    return str(exc.response.get("Error", {}).get("Code", "")) if isinstance(exc, ClientError) else ""


def is_endpoint_updating(exc: BaseException) -> bool:
    if error_code(exc) != "ValidationException":
        return False
    message = str(exc).lower()
    return any(marker in message for marker in _UPDATING_MARKERS)


def is_retryable(exc: BaseException) -> bool:
    """True for errors that go away by waiting: throttling, concurrent updates, an updating endpoint."""
    code = error_code(exc)
    return code in THROTTLING_CODES or code in TRANSIENT_CODES or is_endpoint_updating(exc)


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait out retryable errors: exponential backoff with full jitter, capped."""

    attempts: int = 6
    max_wait_s: float = 8.0
    initial_wait_s: float = 0.5


#: For tests and the demo: same behaviour, no sleeping to speak of.
FAST_RETRY = RetryPolicy(attempts=6, max_wait_s=0.01, initial_wait_s=0.001)


def call_with_retry(policy: RetryPolicy, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Call ``fn``, retrying retryable AWS errors; the last error is re-raised unchanged.

    Examples
    --------
    >>> call_with_retry(FAST_RETRY, int, "42")
    42
    """
    retrying = Retrying(
        retry=retry_if_exception(is_retryable),
        wait=wait_random_exponential(multiplier=policy.initial_wait_s, max=policy.max_wait_s),
        stop=stop_after_attempt(policy.attempts),
        reraise=True,
    )
    return retrying(fn, *args, **kwargs)
