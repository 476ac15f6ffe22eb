"""``fleetctl kill-switch``: stop (engage) or resume (release) every automated change, and audit who did it."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel

from fleetctl import audit_trail, awsclients, status
from fleetctl.stack import KILL_SWITCH, Stack


class KillSwitchReport(BaseModel):
    stack: str
    parameter: str
    engaged: bool
    changed: bool
    by: str | None
    audited_endpoints: list[str]


def read(stack: Stack) -> KillSwitchReport:
    return KillSwitchReport(
        stack=stack.name,
        parameter=stack.output(KILL_SWITCH),
        engaged=status.kill_switch_engaged(stack),
        changed=False,
        by=None,
        audited_endpoints=[],
    )


def set_engaged(stack: Stack, engaged: bool, by: str, reason: str, audited: list[str]) -> KillSwitchReport:
    """Write the switch (unless it already says so) and one audit record per endpoint in ``audited``.

    The records carry the wall-clock time of the change (never ``--now``): the trail says when it happened.
    """
    from fleetops.audit import AuditRecord
    from fleetops.aws.switches import ENGAGED, RELEASED

    before = read(stack)
    if before.engaged == engaged:
        return before
    value = ENGAGED if engaged else RELEASED
    awsclients.client("ssm").put_parameter(Name=before.parameter, Value=value, Type="String", Overwrite=True)
    old = ENGAGED if before.engaged else RELEASED
    for endpoint_name in audited:
        audit_trail.write(
            stack,
            AuditRecord(
                endpoint_name=endpoint_name,
                actor=by,
                trigger="fleetctl kill-switch",
                action=f"{'engage' if engaged else 'release'} kill switch",
                reason=reason or "operator request",
                outcome="applied",
                before={"kill_switch": old},
                after={"kill_switch": value},
                at=datetime.now(UTC),
            ),
        )
    return before.model_copy(update={"engaged": engaged, "changed": True, "by": by, "audited_endpoints": audited})
