"""The kill switch: one SSM parameter that stops every automated fleet change at once.

It fails closed: only the value ``released`` lets automation change the fleet. A parameter that is
missing, unreadable or holds anything else counts as engaged, because a switch that cannot be read
cannot prove that the operator has not pulled it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger

from fleetops.aws import clients
from fleetops.aws.retry import error_code

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient

ENGAGED = "engaged"
RELEASED = "released"

#: What :meth:`KillSwitch.state` reads: the two values an operator writes, or why none could be read.
SwitchState = Literal["engaged", "released", "missing", "unreadable"]

logger = Logger(child=True)


class KillSwitch:
    def __init__(self, parameter_name: str, client: SSMClient | None = None):
        self._name = parameter_name
        self._client = client or clients.client("ssm")

    def state(self) -> SwitchState:
        """The switch as read now; anything but ``released`` stops automation (see :meth:`engaged`)."""
        if not self._name:
            logger.warning("no kill switch parameter configured; treating as engaged")
            return "missing"
        try:
            value = self._client.get_parameter(Name=self._name)["Parameter"]["Value"]
        except Exception as exc:  # any failure to read fails closed, and says why
            missing = error_code(exc) == "ParameterNotFound"
            logger.warning(
                "kill switch parameter %s; treating as engaged",
                "missing" if missing else "unreadable",
                extra={"parameter": self._name, "error": repr(exc)},
            )
            return "missing" if missing else "unreadable"
        word = value.strip().lower()
        if word == RELEASED:
            return "released"
        if word != ENGAGED:
            logger.warning("kill switch holds %r, not engaged/released; treating as engaged", value)
        return "engaged"

    def engaged(self) -> bool:
        """True when automation must not change anything: engaged, missing, unreadable or an unknown value."""
        return self.state() != "released"
