"""The local function URL (a test double for Lambda's IAM-authorised URLs) refuses what AWS would refuse."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from fleetctl.errors import ExitCode
from tests.integration.fleetctl.test_rollouts import request_file


def _post(url: str, credentials: Credentials, service: str = "lambda") -> tuple[int, Any]:
    data = json.dumps({"rollout_id": "v1"}).encode()
    signed = AWSRequest(method="POST", url=url, data=data, headers={"Content-Type": "application/json"})
    SigV4Auth(credentials, service, "us-east-1").add_auth(signed)
    request = urllib.request.Request(url, data=data, headers=dict(signed.headers.items()), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_key_no_iam_user_holds_or_a_signature_for_another_service_is_refused(stack, people) -> None:
    url = stack.outputs["RolloutRequestUrl"]
    alice = people["alice"].environment
    keys = Credentials(alice["AWS_ACCESS_KEY_ID"], alice["AWS_SECRET_ACCESS_KEY"])

    assert _post(url, Credentials("AKIAIOSFODNN7EXAMPLE", "x")) == (
        403,
        {"Message": "The security token included in the request is invalid."},
    )
    assert _post(url, keys, service="execute-api") == (403, {"Message": "Forbidden"})
    assert _post(url, keys)[0] == 400  # alice's signature reaches the function, which checks the body


def test_fleetctl_signed_by_an_unknown_key_is_told_which_policy_it_needs(stack, cli, tmp_path) -> None:
    started = cli("rollout", "start", request_file(tmp_path, "v13"))  # the emulator's default keys: no IAM user

    assert started.code == ExitCode.AWS_ACCESS
    assert "the rollout request 'v13' was refused (403)" in started.err
    assert "RolloutRequesterPolicy" in started.err
