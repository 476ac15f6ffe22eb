"""The kill switch: one SSM parameter that stops every automated fleet change at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from fleetops.aws import clients
from fleetops.aws.retry import error_code

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient

ENGAGED = "engaged"
RELEASED = "released"

logger = Logger(child=True)


class KillSwitch:
    def __init__(self, parameter_name: str, client: SSMClient | None = None):
        self._name = parameter_name
        self._client = client or clients.client("ssm")

    def engaged(self) -> bool:
        """True when automation must not change anything. A missing parameter counts as released."""
        if not self._name:
            return False
        try:
            value = self._client.get_parameter(Name=self._name)["Parameter"]["Value"]
        except Exception as exc:
            if error_code(exc) == "ParameterNotFound":
                logger.warning("kill switch parameter missing; treating as released", extra={"parameter": self._name})
                return False
            raise
        return value.strip().lower() == ENGAGED
