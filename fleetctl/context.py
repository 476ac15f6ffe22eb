"""What every command needs from the global options: the stack (described once), "now" and the fleet file."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from fleetctl import timefmt
from fleetctl.errors import CliError, ExitCode
from fleetctl.stack import Stack, resolve
from fleetops import SHIPPED_CONFIG_DIR

if TYPE_CHECKING:
    from fleetops.config import FleetConfig


#: The fleet file of this checkout (the layer deploys it), or the copy an installed fleetctl carries.
DEFAULT_FLEET = SHIPPED_CONFIG_DIR / "fleet.yaml"


class Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    @property
    def stack_name(self) -> str | None:
        """The stack --stack or FLEETCTL_STACK names, if any (commands that can do without one ask first)."""
        return getattr(self.args, "stack", None) or os.environ.get("FLEETCTL_STACK")

    @cached_property
    def stack(self) -> Stack:
        return resolve(self.stack_name)

    @cached_property
    def now(self) -> datetime:
        given = getattr(self.args, "now", None)
        if not given:
            return datetime.now(UTC)
        return timefmt.parse_time(given, ZoneInfo("UTC"), "--now", datetime.now(UTC))

    @cached_property
    def fleet(self) -> FleetConfig:
        from fleetops.config import FleetConfigError, load_fleet_config

        path = getattr(self.args, "fleet", None) or DEFAULT_FLEET
        try:
            return load_fleet_config(path)
        except FleetConfigError as exc:
            raise CliError(ExitCode.USAGE, str(exc), "pass --fleet with a valid fleet.yaml") from None

    def identity(self) -> str:
        """The caller's ARN from STS GetCallerIdentity: who approves, rolls back or engages the kill switch."""
        from fleetctl import awsclients

        return str(awsclients.client("sts").get_caller_identity()["Arn"])
