"""The signed caller of a request to an IAM-authorised function URL, from the request context Lambda fills in.

The rollout request and approval functions take who asks and who decides from here, never from the payload.
Their events must have the function URL's shape (payload format 2.0) with an IAM authorizer of the function's
own account: a direct ``lambda:Invoke`` with a payload naming a caller (``caller``, ``requested_by``, ...) or
without the URL's request context is refused. A direct invoke that copies that shape exactly cannot be told
apart here; IAM keeps those out (docs/approval-permissions.md: people may invoke only through the URL, and the
boundary denies a direct ``lambda:InvokeFunction`` on these functions).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: The top-level fields of a function URL event (payload format 2.0); anything else was not sent by Lambda.
URL_EVENT_FIELDS = frozenset(
    {
        "version",
        "routeKey",
        "rawPath",
        "rawQueryString",
        "cookies",
        "headers",
        "queryStringParameters",
        "pathParameters",
        "stageVariables",
        "requestContext",
        "body",
        "isBase64Encoded",
    }
)

_SESSION = re.compile(r"^arn:[\w-]+:sts::\d{12}:assumed-role/[^/]+/(?P<session>.+)$")


class ForgedCallerError(Exception):
    """The event is not a signed function URL request: nobody may be taken as its caller."""


def _refuse(why: str) -> ForgedCallerError:
    return ForgedCallerError(
        f"refused: {why}. This function takes its caller only from a SigV4-signed request to its function URL; "
        "call the URL (fleetctl, or awscurl --service lambda), not lambda:Invoke"
    )


def signed_caller(event: Any, function_arn: str) -> str:
    """The caller's IAM ARN as Lambda's URL integration asserted it for ``event`` to function ``function_arn``.

    Examples
    --------
    >>> signed_caller({"rollout_id": "v7", "caller": "arn:aws:iam::123456789012:user/bob"},
    ...               "arn:aws:lambda:us-east-1:123456789012:function:approve")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fleetops.rollout.url_caller.ForgedCallerError: refused: the event has fields no function URL request has \
(caller, rollout_id). ...
    """
    if not isinstance(event, Mapping):
        raise _refuse("the event is not a function URL request")
    extra = sorted(set(event) - URL_EVENT_FIELDS)
    if extra:
        raise _refuse(f"the event has fields no function URL request has ({', '.join(extra)})")
    context = event.get("requestContext")
    if (
        event.get("version") != "2.0"
        or not isinstance(context, Mapping)
        or not isinstance(context.get("http"), Mapping)
    ):
        raise _refuse("the event lacks the function URL's request context (payload format 2.0)")
    authorizer = context.get("authorizer")
    iam = authorizer.get("iam") if isinstance(authorizer, Mapping) else None
    caller = iam.get("userArn") if isinstance(iam, Mapping) else None
    if not isinstance(iam, Mapping) or not isinstance(caller, str) or not caller:
        raise _refuse("the request carries no IAM identity")
    account = function_arn.split(":")[4] if function_arn.count(":") >= 6 else ""
    if iam.get("accountId") != account or caller.split(":")[4:5] != [account]:
        raise _refuse(f"the caller {caller} is not of this function's account {account}")
    session = _SESSION.fullmatch(caller)
    user_id = iam.get("userId") or iam.get("callerId") or ""
    if session and not str(user_id).endswith(f":{session['session']}"):
        raise _refuse(f"the caller's id {json.dumps(user_id)} is not a session of {caller}")
    return caller
