"""Requesting a rollout: the execution input with ``requested_by`` set from the signed caller, never the body.

Step Functions does not tell a state machine who called StartExecution, so the rollout workflow is started
by the request function behind an IAM-authorised URL: the body is the rollout request, the caller's IAM ARN
(from the signature, not from anything the caller wrote) becomes ``requested_by``, and the request is recorded
in the approval table before the execution starts (:mod:`fleetops.rollout.requester`). The approval steps read
the requester from that record, so an execution started any other way cannot be approved. The execution is
named after the rollout id, so a repeat of the same request is the same execution and another request under
that id is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from fleetops.rollout.request_schema import RolloutInputError, parse_request
from fleetops.rollout.requester import RolloutRecord, new_record

#: The request field the caller may not set: the request function sets it from the signature.
REQUESTER_FIELD = "requested_by"


class RolloutRequestRefusedError(Exception):
    """The request cannot start a rollout; ``http_status`` and a message that says what is wrong."""

    def __init__(self, http_status: int, message: str) -> None:
        self.http_status = http_status
        super().__init__(message)


class RolloutStarted(BaseModel):
    model_config = ConfigDict(frozen=True)

    rollout_id: str
    execution_arn: str
    requested_by: str


@dataclass(frozen=True)
class RequestDeps:
    #: Store the request's record unless one with another input exists under its name (then False).
    record: Callable[[RolloutRecord], bool]
    #: (execution name, input JSON) -> execution ARN; the same name with the same input returns the same ARN,
    #: another input under that name raises :class:`RolloutRequestRefusedError` (409).
    start: Callable[[str, str], str]


def execution_input(body: Any, caller: str) -> tuple[str, str]:
    """The execution's name (the rollout id) and input for ``body`` requested by ``caller``.

    Examples
    --------
    >>> execution_input({"rollout_id": "v7", "requested_by": "me"}, "arn:aws:iam::1:user/a")
    Traceback (most recent call last):
    ...
    fleetops.rollout.request.RolloutRequestRefusedError: requested_by may not be set: it is the signed caller's \
IAM identity (remove the field)
    """
    if not caller:  # AWS_IAM auth always provides one; refuse rather than start an anonymous rollout
        raise RolloutRequestRefusedError(403, "the request carries no IAM identity")
    if not isinstance(body, dict):
        raise RolloutRequestRefusedError(400, f"the rollout request is a JSON object, not {type(body).__name__}")
    if REQUESTER_FIELD in body:
        raise RolloutRequestRefusedError(
            400, f"{REQUESTER_FIELD} may not be set: it is the signed caller's IAM identity (remove the field)"
        )
    request = {**body, REQUESTER_FIELD: caller}
    try:
        parsed = parse_request(request)
    except RolloutInputError as exc:
        raise RolloutRequestRefusedError(400, str(exc)) from None
    return parsed.rollout_id, json.dumps(request, sort_keys=True)


def request_rollout(body: Any, caller: str, deps: RequestDeps, now: datetime) -> RolloutStarted:
    """Record, then start (or find again, for a repeat) the rollout execution of ``body`` requested by ``caller``.

    Raises
    ------
    RolloutRequestRefusedError
        400 / 403 for the request itself; 409 when another request was recorded or started under its rollout id.
    """
    name, document = execution_input(body, caller)
    if not deps.record(new_record(name, caller, document, now)):
        raise RolloutRequestRefusedError(
            409,
            f"rollout {name!r} was requested before with another request (or by someone else); "
            "give the new rollout its own rollout_id",
        )
    return RolloutStarted(rollout_id=name, execution_arn=deps.start(name, document), requested_by=caller)


def same_input(stored: str, document: str) -> bool:
    """Whether an existing execution's input is this request (compared as JSON, not as text).

    Examples
    --------
    >>> same_input('{"b": 1, "a": 2}', '{"a": 2, "b": 1}')
    True
    """
    try:
        return bool(json.loads(stored) == json.loads(document))
    except ValueError:
        return False
