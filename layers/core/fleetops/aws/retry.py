"""Waiting out AWS's "a change is still in progress" answers; everything else fails at once.

Clients built by :mod:`fleetops.aws.clients` use botocore's standard retry mode, which already
retries throttling, 5xx answers and dropped connections. Two 400s also pass by waiting and botocore
cannot tell them from a refusal: SageMaker's ValidationException for an endpoint that is still
updating, and Application Auto Scaling's ConcurrentUpdateException. Only those are retried here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from botocore.exceptions import ClientError

T = TypeVar("T")

# SageMaker answers a change to an endpoint that is still updating with a ValidationException whose
# only distinguishing mark is its message ("Cannot update in-progress endpoint ...").
_UPDATING_MARKERS = ("in-progress endpoint", "is in updating", "status updating", "endpoint is updating")


def error_code(exc: BaseException) -> str:
    return str(exc.response.get("Error", {}).get("Code", "")) if isinstance(exc, ClientError) else ""


def condition_failed(exc: BaseException) -> bool:
    """Whether a DynamoDB conditional write lost its condition (rather than failing for another reason)."""
    return error_code(exc) == "ConditionalCheckFailedException"


def is_endpoint_updating(exc: BaseException) -> bool:
    if error_code(exc) != "ValidationException":
        return False
    message = str(exc).lower()
    return any(marker in message for marker in _UPDATING_MARKERS)


def is_update_in_progress(exc: BaseException) -> bool:
    """True for the refusals that go away by waiting: an updating endpoint, a concurrent scaling update.

    Examples
    --------
    >>> def answer(code: str) -> ClientError:
    ...     return ClientError({"Error": {"Code": code, "Message": "..."}}, "PutScheduledAction")
    >>> is_update_in_progress(answer("ConcurrentUpdateException"))
    True
    >>> is_update_in_progress(answer("ThrottlingException"))  # botocore's own retries handle this one
    False
    """
    return error_code(exc) == "ConcurrentUpdateException" or is_endpoint_updating(exc)


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait out an update in progress: exponential backoff with full jitter, capped."""

    attempts: int = 6
    max_wait_s: float = 8.0
    initial_wait_s: float = 0.5


#: For tests and the demo: same behaviour, no sleeping to speak of.
FAST_RETRY = RetryPolicy(attempts=6, max_wait_s=0.01, initial_wait_s=0.001)


def call_with_retry(policy: RetryPolicy, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Call ``fn``, waiting out an update in progress; the last error is re-raised unchanged.

    Examples
    --------
    >>> call_with_retry(FAST_RETRY, int, "42")
    42
    """
    # Imported here: most callers of this module only read error codes, and a handler's cold start should not
    # pay for tenacity until a call that may wait is made (a few ms once, on the first such call).
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

    retrying = Retrying(
        retry=retry_if_exception(is_update_in_progress),
        wait=wait_random_exponential(multiplier=policy.initial_wait_s, max=policy.max_wait_s),
        stop=stop_after_attempt(policy.attempts),
        reraise=True,
    )
    return retrying(fn, *args, **kwargs)
