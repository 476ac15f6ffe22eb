"""What an AWS failure means for the person at the keyboard: the exit code and what to do next."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetctl.errors import CliError, ExitCode

if TYPE_CHECKING:
    from botocore.exceptions import ClientError

_CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
    }
)
_DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
_NO_CREDENTIALS_HINT = (
    "sign in (aws sso login, or set AWS_PROFILE / AWS_ACCESS_KEY_ID) and check with: aws sts get-caller-identity"
)


def denied(exc: BaseException) -> str | None:
    """Why AWS refused a read (its message), when ``exc`` is an access denial, else ``None``.

    A read that only adds detail (a rollout's state history, its pending approval) is shown as unreadable rather
    than failing the command: the approval's service control policy denies exactly those reads to people.
    """
    from botocore.exceptions import ClientError

    if not isinstance(exc, ClientError):
        return None
    error = exc.response.get("Error", {})
    if str(error.get("Code", "")) not in _DENIED_CODES:
        return None
    return f"access denied on {exc.operation_name}: {error.get('Message', '')}".rstrip(": ")


def translate(exc: BaseException) -> CliError | None:
    """The :class:`CliError` for a botocore exception fleetctl knows how to explain, else ``None``.

    Examples
    --------
    >>> from botocore.exceptions import NoCredentialsError
    >>> translate(NoCredentialsError()).exit_code
    <ExitCode.AWS_ACCESS: 4>
    """
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return CliError(ExitCode.AWS_ACCESS, "no AWS credentials found", _NO_CREDENTIALS_HINT)
    if isinstance(exc, NoRegionError):
        return CliError(ExitCode.AWS_ACCESS, "no AWS region set", "pass --region or set AWS_REGION")
    if isinstance(exc, EndpointConnectionError):
        return CliError(
            ExitCode.AWS_ACCESS,
            f"cannot reach AWS: {exc}",
            "check the network, --region, and AWS_ENDPOINT_URL if you use one",
        )
    if isinstance(exc, ClientError):
        return _client_error(exc)
    return None


def _client_error(exc: ClientError) -> CliError:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    operation = exc.operation_name
    if code in _CREDENTIAL_CODES:
        return CliError(
            ExitCode.AWS_ACCESS, f"AWS refused the credentials ({code}) on {operation}", _NO_CREDENTIALS_HINT
        )
    if code in _DENIED_CODES:
        return CliError(
            ExitCode.AWS_ACCESS,
            f"access denied on {operation}: {error.get('Message', '')}".rstrip(": "),
            "use a role with the stack's RolloutRequesterPolicy or RolloutApproverPolicy (rollouts) or operator rights "
            "(check with: aws sts get-caller-identity)",
        )
    return CliError(
        ExitCode.FAILED,
        f"AWS answered {code or 'an error'} on {operation}: {error.get('Message', '')}".rstrip(": "),
        "run the command again; if it persists, run it with --json and keep the answer for the team",
    )
