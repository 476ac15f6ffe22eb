"""The alarms' own word on whether they are OK, read from CloudWatch (DescribeAlarms).

The responder learns of OK transitions from EventBridge, which neither guarantees order nor delivery: an OK
that arrives before its (delayed) ALARM, or never arrives, would leave a raise waiting for an alarm that is long
OK. The pre-scale reconciler asks CloudWatch instead before it gives up on releasing a raise, and the alarm
responder before it acts on an event that may have been overtaken (:mod:`fleetops.remediation.staleness`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from fleetops.aws import clients
from fleetops.remediation.staleness import AlarmNow

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

#: DescribeAlarms takes at most 100 names a call.
_PAGE = 100


class AlarmStates:
    """Reads metric alarms' states and when they last changed."""

    def __init__(self, client: CloudWatchClient | None = None) -> None:
        self._client = client or clients.client("cloudwatch")

    def ok_since(self, alarm_names: Iterable[str]) -> datetime | None:
        """When the last of ``alarm_names`` went OK, if every one that still exists is OK now; else ``None``.

        An alarm that no longer exists (its stack was updated or deleted) holds nothing; with none left, the
        answer is ``None`` and the raise waits for its recorded OK events, as before.
        """
        names = sorted(set(alarm_names))
        found = []
        for i in range(0, len(names), _PAGE):
            page = self._client.describe_alarms(AlarmNames=names[i : i + _PAGE], AlarmTypes=["MetricAlarm"])
            found += page.get("MetricAlarms", [])
        if not found or any(alarm["StateValue"] != "OK" for alarm in found):
            return None
        return max(alarm["StateUpdatedTimestamp"] for alarm in found)

    def current(self, alarm_name: str) -> AlarmNow | None:
        """The alarm's state now and when it last changed; ``None`` when no such metric alarm exists."""
        found = self._client.describe_alarms(AlarmNames=[alarm_name], AlarmTypes=["MetricAlarm"]).get("MetricAlarms")
        if not found:
            return None
        return AlarmNow(state=found[0]["StateValue"], updated_at=found[0]["StateUpdatedTimestamp"])
