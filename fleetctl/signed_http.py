"""POST JSON to one of the stack's IAM-authorised function URLs, SigV4-signed as the caller (service ``lambda``).

Requests and decisions go only through those URLs: the functions behind them take the caller's identity
from the signature (who requested a rollout, who decided a step), so nothing here says who the caller is.
An answer other than 2xx becomes a :class:`~fleetctl.errors.CliError` carrying the function's own reason.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from fleetctl import awsclients
from fleetctl.errors import CliError, ExitCode

#: The function's answer -> exit code (README, Operate: exit codes). 403 is "not you": no right to the URL,
#: or the approval refuses this caller (its own rollout).
_EXIT: dict[int, ExitCode] = {
    400: ExitCode.USAGE,
    403: ExitCode.AWS_ACCESS,
    404: ExitCode.NOT_FOUND,
    409: ExitCode.CONFLICT,
    410: ExitCode.CONFLICT,
}
_TIMEOUT_S = 30.0


def _signed(url: str, document: bytes) -> urllib.request.Request:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.exceptions import NoCredentialsError

    credentials = awsclients.session().get_credentials()
    if credentials is None:
        raise NoCredentialsError()
    request = AWSRequest(method="POST", url=url, data=document, headers={"Content-Type": "application/json"})
    SigV4Auth(credentials.get_frozen_credentials(), "lambda", awsclients.region() or "us-east-1").add_auth(request)
    return urllib.request.Request(url, data=document, headers=dict(request.headers.items()), method="POST")


def post_json(url: str, body: dict[str, Any], what: str, hint: str) -> dict[str, Any]:
    """POST ``body`` to ``url``; the JSON answer, or a :class:`CliError` with the function's reason.

    ``what`` names the call in messages (``"the rollout request"``), ``hint`` is what to do when refused.
    """
    try:
        with urllib.request.urlopen(_signed(url, json.dumps(body).encode()), timeout=_TIMEOUT_S) as answer:
            data = json.loads(answer.read() or b"{}")
            return data if isinstance(data, dict) else {"answer": data}
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode(errors="replace")
    except urllib.error.URLError as exc:
        raise CliError(ExitCode.AWS_ACCESS, f"cannot reach {url}: {exc.reason}", "check the network") from None
    try:
        answer_body = json.loads(text)
    except ValueError:
        answer_body = {}
    reason = answer_body.get("message") or answer_body.get("Message") or text.strip() or f"HTTP {status}"
    if status == 403 and "Message" in answer_body:  # Lambda's own refusal (signature or policy), not the function's
        hint = (
            "use a role with the stack's RolloutRequesterPolicy or RolloutApproverPolicy "
            "(check: aws sts get-caller-identity)"
        )
    raise CliError(_EXIT.get(status, ExitCode.FAILED), f"{what} was refused ({status}): {reason}", hint)
