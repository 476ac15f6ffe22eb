"""The audit trail of one endpoint, read through fleetops' audit table adapter."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from fleetctl import awsclients
from fleetctl.stack import AUDIT_TABLE, Stack

if TYPE_CHECKING:
    from fleetops.audit import AuditRecord


def records(stack: Stack, endpoint_name: str, since: datetime | None = None) -> list[AuditRecord]:
    """Every record of ``endpoint_name`` at or after ``since``, oldest first."""
    from fleetops.aws.audit_table import AuditTable

    table = AuditTable(stack.output(AUDIT_TABLE), resource=awsclients.dynamodb_resource())
    return table.list(endpoint_name, since)


def write(stack: Stack, record: AuditRecord) -> AuditRecord:
    """Record an operator's action as the automation records its own."""
    from fleetops.aws.audit_table import AuditTable

    return AuditTable(stack.output(AUDIT_TABLE), resource=awsclients.dynamodb_resource()).write(record)
