"""Step Functions executions: how one is doing (DescribeExecution)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetops.aws import clients
from fleetops.aws.retry import error_code

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

#: What :meth:`Executions.status` answers for an execution Step Functions does not know (any more).
MISSING = "MISSING"


class Executions:
    """Reads an execution's status: ``RUNNING``, ``SUCCEEDED``, ``FAILED``, ``TIMED_OUT``, ``ABORTED``, ...

    Parameters
    ----------
    client
        A Step Functions client; ``None`` builds a default one.

    Examples
    --------
    DescribeExecution is the whole job, so the use is shown rather than run
    (``tests/integration/workflows/test_rollback.py`` runs it against the emulator)::

        Executions().status("arn:aws:states:us-east-1:123456789012:execution:rollback:oom-1")  # 'FAILED'
    """

    def __init__(self, client: SFNClient | None = None) -> None:
        self._client: SFNClient = client or clients.client("stepfunctions")

    def status(self, execution_arn: str) -> str:
        """The execution's status; :data:`MISSING` when it does not exist (history expired, or never ran)."""
        try:
            return str(self._client.describe_execution(executionArn=execution_arn)["status"])
        except Exception as exc:
            if error_code(exc) == "ExecutionDoesNotExist":
                return MISSING
            raise
