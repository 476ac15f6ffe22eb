"""Exit codes scripts can rely on, and the one error type commands raise (a message and what to do next).

Examples
--------
>>> CliError(ExitCode.NOT_FOUND, "stack 'x' does not exist", "pass --stack").exit_code
<ExitCode.NOT_FOUND: 3>
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented in ``fleetctl --help`` and the README (Operate); never renumbered."""

    OK = 0
    #: Something unexpected (a bug, or an AWS error fleetctl does not know): the message has AWS's words.
    FAILED = 1
    #: Bad input: an unknown flag, a malformed time, an unknown time zone, an invalid calendar entry.
    USAGE = 2
    #: What was named does not exist: the stack, the endpoint, the rollout, the calendar entry.
    NOT_FOUND = 3
    #: AWS cannot be reached as this caller: no credentials, expired credentials, access denied, no network.
    AWS_ACCESS = 4
    #: The request is valid but the system's state refuses it: no approval pending, a used or expired
    #: approval, a rollout that no longer waits, an execution already running with other input.
    CONFLICT = 5
    #: A wait (``--wait``) ran out of time; what it waited for may still finish.
    TIMEOUT = 6
    #: A finished workflow failed (a rollout rolled back, a rollback failed): the output says why.
    WORKFLOW_FAILED = 7


EXIT_CODE_HELP = """exit codes:
  0  success
  1  unexpected error (the message carries AWS's own words)
  2  bad input: unknown flag, malformed time, unknown time zone, invalid calendar entry
  3  not found: stack, endpoint, rollout or calendar entry
  4  AWS not reachable as this caller: no or expired credentials, access denied, no network
  5  refused by the current state: nothing to approve, approval used or expired, rollout gone
  6  a --wait ran out of time (the workflow may still finish)
  7  the workflow waited for failed (rolled back, or the rollback itself failed)"""


class CliError(Exception):
    """What went wrong, in words for a person, with the next thing to try and the exit code.

    Parameters
    ----------
    exit_code
        One of :class:`ExitCode`.
    message
        What is wrong (no secrets, no task tokens).
    hint
        What to do next.
    """

    def __init__(self, exit_code: ExitCode, message: str, hint: str = "") -> None:
        self.exit_code = exit_code
        self.message = message
        self.hint = hint
        super().__init__(message)
