"""The audit table on the emulator: records round-trip, and a query from a time reads only what came after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from devtools.aws_resources import create_core_resources
from fleetops.audit import AuditRecord
from fleetops.aws.audit_table import AuditRecordConflictError, AuditTable

START = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def _record(endpoint: str, minutes: int) -> AuditRecord:
    return AuditRecord(
        endpoint_name=endpoint,
        actor="prescale",
        trigger="schedule",
        action="set_min_capacity",
        reason=f"record at +{minutes} min",
        outcome="applied",
        before={"min": 2},
        after={"min": 8},
        at=START + timedelta(minutes=minutes),
    )


def test_list_since_reads_from_that_time_on_by_the_sort_key() -> None:
    table = AuditTable(create_core_resources().audit_table)
    for minutes in (40, 0, 20, 60):
        table.write(_record("manga-chat-prod", minutes))
    table.write(_record("manga-chat-staging", 30))

    everything = table.list("manga-chat-prod")
    since_20 = table.list("manga-chat-prod", since=START + timedelta(minutes=20))

    assert [r.reason for r in everything] == [f"record at +{m} min" for m in (0, 20, 40, 60)]
    assert [r.reason for r in since_20] == [f"record at +{m} min" for m in (20, 40, 60)]
    assert since_20[0].before == {"min": 2} and since_20[0].after == {"min": 8}
    assert table.list("manga-chat-prod", since=START + timedelta(hours=2)) == []


def test_writing_the_same_record_again_is_a_no_op_and_a_different_one_never_overwrites_it() -> None:
    table = AuditTable(create_core_resources().audit_table)
    first = table.write(_record("manga-chat-prod", 0))  # now with its record id, as a retry would resend it

    assert table.write(first) == first  # a retry after a lost answer finds itself
    forged = first.model_copy(update={"reason": "rewritten after the fact", "outcome": "skipped"})
    with pytest.raises(AuditRecordConflictError, match="already exists with other content"):
        table.write(forged)

    [kept] = table.list("manga-chat-prod")
    assert (kept.reason, kept.outcome) == ("record at +0 min", "applied")
