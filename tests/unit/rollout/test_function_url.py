"""A function URL request as the rollout request and approval functions read it, and the answer they give."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from fleetops.rollout.function_url import Answer, UrlRequest, answer, route
from tests.conftest import load_event


def test_the_sample_approval_post_is_read_as_lambda_sent_it() -> None:
    request = UrlRequest.from_event(load_event("approval_endpoint"))

    assert (request.method, request.path) == ("POST", "/")
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert request.body == "id=0123456789abcdefghijABCDEFGHIJ0123456789abc&decision=approve"
    assert request.query == {}
    assert request.received == datetime(2026, 11, 21, 10, 7, tzinfo=UTC)  # requestContext.timeEpoch


def test_a_base64_body_is_decoded_and_header_names_are_matched_in_lower_case() -> None:
    event = load_event("rollout_request")
    text = event["body"]
    event |= {"body": base64.b64encode(text.encode()).decode(), "isBase64Encoded": True}
    event["headers"] = {"Content-Type": "application/json"}
    event["requestContext"]["http"]["method"] = "post"

    request = UrlRequest.from_event(event)

    assert request.body == text and json.loads(text)["rollout_id"]
    assert (request.method, request.headers["content-type"]) == ("POST", "application/json")


def _ok(request: UrlRequest) -> Answer:
    return answer(200, f"hello {request.query.get('name')}", "text/plain", {"Cache-Control": "no-store"})


def test_the_route_of_the_method_answers_in_the_function_url_response_shape() -> None:
    event = load_event("approval_endpoint")
    event["requestContext"]["http"]["method"] = "GET"
    event["queryStringParameters"] = {"name": "kenji"}

    result = route(UrlRequest.from_event(event), {"GET": _ok})

    assert result == {
        "statusCode": 200,
        "body": "hello kenji",
        "isBase64Encoded": False,
        "headers": {"Cache-Control": "no-store", "Content-Type": "text/plain"},
        "cookies": [],
    }


def test_another_method_or_path_is_not_found() -> None:
    """What the caller sees for anything but the function's routes: 404 and Powertools' 'Not found' body."""
    event = load_event("approval_endpoint")  # a POST
    other_path = load_event("approval_endpoint") | {"rawPath": "/admin"}

    for request in (UrlRequest.from_event(event), UrlRequest.from_event(other_path)):
        result = route(request, {"GET": _ok} if request.path == "/" else {"POST": _ok})
        assert result["statusCode"] == 404
        assert json.loads(result["body"]) == {"statusCode": 404, "message": "Not found"}
        assert result["headers"] == {"Content-Type": "application/json"}
