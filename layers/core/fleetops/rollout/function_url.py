"""A request to a Lambda function URL (payload format 2.0) and the answer Lambda expects back.

The rollout request and approval functions each serve the one path ``/``, a handler per method. This reads
what they need of the event and builds the response in the shape Powertools' ``LambdaFunctionUrlResolver``
gives (an unknown path or method: 404 ``Not found``), without importing Powertools' event handler and event
classes, which cost those functions' cold starts about 50 ms for two routes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: What a handler returns to Lambda: ``statusCode``, ``body``, ``headers`` (and ``cookies``, ``isBase64Encoded``).
Answer = dict[str, Any]


@dataclass(frozen=True)
class UrlRequest:
    """What the functions read of a function URL event; header names are lower case, as Lambda sends them."""

    method: str
    path: str
    headers: Mapping[str, str]
    query: Mapping[str, str]
    body: str | None  # decoded when Lambda sent it base64-encoded
    time_epoch_ms: int | None  # requestContext.timeEpoch: when Lambda received the request

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> UrlRequest:
        """The request of a function URL event whose shape :func:`fleetops.rollout.url_caller.signed_caller` checked.

        Examples
        --------
        >>> event = {"rawPath": "/", "headers": {"Content-Type": "application/json"}, "body": "e30=",
        ...          "isBase64Encoded": True, "requestContext": {"http": {"method": "post"}, "timeEpoch": 0}}
        >>> request = UrlRequest.from_event(event)
        >>> request.method, request.headers["content-type"], request.body, request.received.isoformat()
        ('POST', 'application/json', '{}', '1970-01-01T00:00:00+00:00')
        """
        context = event["requestContext"]
        body = event.get("body")
        if event.get("isBase64Encoded") and body:
            body = base64.b64decode(body.encode()).decode()
        return cls(
            method=str(context["http"]["method"]).upper(),
            path=event["rawPath"],
            headers={str(k).lower(): v for k, v in (event.get("headers") or {}).items()},
            query=event.get("queryStringParameters") or {},
            body=body,
            time_epoch_ms=context.get("timeEpoch"),
        )

    @property
    def received(self) -> datetime:
        """When Lambda received the request: the functions' "now"."""
        if self.time_epoch_ms is None:
            raise KeyError("timeEpoch")  # Lambda always sends it; the resolver failed the same way without it
        return datetime.fromtimestamp(self.time_epoch_ms / 1000, UTC)


def answer(status: int, body: str, content_type: str, headers: Mapping[str, str] | None = None) -> Answer:
    """The response Lambda turns into the HTTP answer.

    Examples
    --------
    >>> answer(200, "{}", "application/json", {"Cache-Control": "no-store"})["headers"]
    {'Cache-Control': 'no-store', 'Content-Type': 'application/json'}
    """
    return {
        "statusCode": status,
        "body": body,
        "isBase64Encoded": False,
        "headers": {**(headers or {}), "Content-Type": content_type},
        "cookies": [],
    }


def route(request: UrlRequest, handlers: Mapping[str, Callable[[UrlRequest], Answer]]) -> Answer:
    """The answer of the handler for the request's method on ``/``; 404 for another path or method.

    Examples
    --------
    >>> request = UrlRequest("PUT", "/", {}, {}, None, None)
    >>> route(request, {"GET": lambda r: answer(200, "ok", "text/plain")})["body"]
    '{"statusCode":404,"message":"Not found"}'
    """
    handler = handlers.get(request.method) if request.path == "/" else None
    if handler is None:
        body = json.dumps({"statusCode": 404, "message": "Not found"}, separators=(",", ":"))
        return answer(404, body, "application/json")
    return handler(request)
