"""TEST DOUBLE for a Lambda function URL with ``AuthType: AWS_IAM``: an HTTP server in front of a real handler.

moto serves no function URLs, so this stands in for their front end on the emulator. It is a test double,
not an emulation of Lambda's authoriser: it requires a SigV4 ``Authorization`` header for service
``lambda`` (an unsigned request gets AWS's 403 ``Forbidden``), resolves the signer from the header's access
key id through the emulator's real IAM API (``GetAccessKeyLastUsed`` -> user name -> ``GetUser`` -> ARN),
builds the event Lambda passes for a function URL request (payload format 2.0, which Powertools'
``LambdaFunctionUrlResolver`` parses) and calls the project's handler in this process, as
:mod:`devtools.lambda_dispatch` does for the workflows' tasks. It does not verify the signature itself
(IAM never gives a secret key back, so there is nothing to check it against): tests sign with real
credentials of emulator IAM users, and a request no user signed is refused.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
from botocore.exceptions import ClientError

from devtools.emulated_account import ACCOUNT_ID
from devtools.lambda_dispatch import FakeLambdaContext, load_handler_module

#: ``Credential=<key id>/<date>/<region>/<service>/aws4_request`` of a SigV4 Authorization header.
_SIGV4 = re.compile(r"^AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]+)/\d{8}/[\w-]+/(?P<service>[\w-]+)/aws4_request,")


class Forbidden(Exception):
    """What the function URL answers before the handler runs (403, AWS's own message)."""


def signer(authorization: str | None) -> dict[str, str]:
    """The IAM user who signed: ``{"userArn", "userId", "accessKey"}``; :class:`Forbidden` when none did."""
    found = _SIGV4.match(authorization or "")
    if not found or found["service"] != "lambda":
        raise Forbidden("Forbidden")
    iam = boto3.client("iam")
    try:
        name = iam.get_access_key_last_used(AccessKeyId=found["key"])["UserName"]
        user = iam.get_user(UserName=name)["User"]
    except (ClientError, KeyError):
        raise Forbidden("The security token included in the request is invalid.") from None
    return {"userArn": user["Arn"], "userId": user["UserId"], "accessKey": found["key"]}


def url_event(method: str, target: str, headers: dict[str, str], body: bytes, iam: dict[str, str]) -> dict[str, Any]:
    """The event Lambda passes for a function URL request signed by ``iam`` (payload format 2.0)."""
    parts = urlsplit(target)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    try:
        text, encoded = body.decode(), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    host = headers.get("host", "localhost")
    return {
        "version": "2.0",
        "rawPath": parts.path or "/",
        "rawQueryString": parts.query,
        "queryStringParameters": query or None,
        "headers": headers,
        "requestContext": {
            "accountId": ACCOUNT_ID,
            "apiId": host.split(".")[0],
            "authorizer": {"iam": {**iam, "accountId": ACCOUNT_ID, "callerId": iam["userId"]}},
            "domainName": host,
            "http": {
                "method": method,
                "path": parts.path or "/",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": "function-url-double",
            "routeKey": "$default",
            "stage": "$default",
            "timeEpoch": int(datetime.now(UTC).timestamp() * 1000),
        },
        "body": text or None,
        "isBase64Encoded": encoded,
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _serve(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {key.lower(): value for key, value in self.headers.items()}
        try:
            iam = signer(headers.get("authorization"))
        except Forbidden as exc:
            self._answer(403, {"Content-Type": "application/json"}, json.dumps({"Message": str(exc)}).encode())
            return
        event = url_event(self.command, self.path, headers, body, iam)
        with self.server.lock:  # one request at a time, as in one Lambda execution environment
            module = load_handler_module(self.server.folder)
            try:
                result = module.lambda_handler(event, FakeLambdaContext(function_name=self.server.folder))
            except Exception as exc:  # a function error: Lambda answers 502 and the client sees no details
                self.server.errors.append(exc)  # tests can still see what failed
                self._answer(502, {"Content-Type": "application/json"}, b'{"Message": "Internal Server Error"}')
                return
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else str(payload).encode()
        self._answer(int(result.get("statusCode", 200)), dict(result.get("headers") or {}), data)

    do_GET = _serve
    do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the handler's own logs say what happened."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, folder: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.folder = folder
        self.lock = threading.Lock()
        self.errors: list[Exception] = []


@contextmanager
def serve(*folders: str) -> Iterator[dict[str, str]]:
    """Serve ``functions/<folder>/app.py`` for each folder on its own local URL; yields folder -> URL."""
    servers = [_Server(folder) for folder in folders]
    threads = [threading.Thread(target=s.serve_forever, name=f"url-{s.folder}", daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield {s.folder: f"http://127.0.0.1:{s.server_address[1]}/" for s in servers}
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def create_user(name: str) -> tuple[str, dict[str, str]]:
    """An IAM user on the emulator with an access key: its ARN and the environment that signs as it."""
    iam = boto3.client("iam")
    arn = iam.create_user(UserName=name)["User"]["Arn"]
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return arn, {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
