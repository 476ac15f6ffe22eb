"""Test doubles at botocore's wire: AWS answers given where the HTTP request would leave, so botocore retries them.

botocore's Stubber answers at ``before-call``, ahead of botocore's retry handler, so a stubbed error
is never retried by botocore. An answer given at ``before-send`` is parsed and judged by botocore's
retry handler exactly as one from AWS would be, which is what a test of botocore's own retries needs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.retries.standard import ExponentialBackoff

#: Never resolved: a client pointed here cannot reach AWS even if a send slips past the double.
DUMMY_ENDPOINT = "https://aws.test.invalid"

#: (HTTP status, JSON body) of one answer.
Answer = tuple[int, dict[str, Any]]


def json_error(code: str, message: str, status: int = 400) -> Answer:
    """An error answer in the JSON protocols (Application Auto Scaling, SageMaker, DynamoDB, Step Functions)."""
    return status, {"__type": code, "message": message}


THROTTLED = json_error("ThrottlingException", "Rate exceeded")


class _Body:
    """The raw body AWSResponse reads (urllib3's response offers the same ``stream``)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: object) -> Iterator[bytes]:
        yield self._data


class ScriptedSends:
    """Test double: a ``before-send`` handler answering each HTTP send of one operation from a script.

    ``answers`` are given in order; after them every send gets ``rest``, or goes out for real when
    ``rest`` is ``None`` (to the emulator in integration tests). ``bodies`` keeps each request's JSON.
    """

    def __init__(self, answers: Sequence[Answer], rest: Answer | None = None) -> None:
        self._answers = list(answers)
        self._rest = rest
        self.bodies: list[dict[str, Any]] = []

    @property
    def sends(self) -> int:
        return len(self.bodies)

    def attach(self, client: Any, operation: str) -> ScriptedSends:
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register(f"before-send.{service}.{operation}", self)
        return self

    def __call__(self, request: AWSPreparedRequest, **_: object) -> AWSResponse | None:
        sent = request.body
        self.bodies.append(json.loads(sent) if isinstance(sent, str | bytes) and sent else {})
        answer = self._answers.pop(0) if self._answers else self._rest
        if answer is None:
            return None
        status, body = answer
        headers = HTTPHeaders.from_dict(
            {"x-amzn-RequestId": "scripted-sends", "Content-Type": "application/x-amz-json-1.1"}
        )
        return AWSResponse(request.url, status, headers, _Body(json.dumps(body).encode()))


def skip_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the pauses botocore's standard retries would take, and take none (the test stays fast)."""
    planned: list[float] = []
    real = ExponentialBackoff.delay_amount

    def no_wait(self: ExponentialBackoff, context: Any) -> float:
        planned.append(real(self, context))
        return 0.0

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", no_wait)
    return planned
