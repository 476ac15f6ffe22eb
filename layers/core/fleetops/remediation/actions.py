"""What the alarm responder can do: the playbook names these, the decisions and the remediation state table use them.

Apart from the playbook's models (:mod:`fleetops.remediation.models`), so the state table (and pre-scaling, which
uses it) does not build them.
"""

from __future__ import annotations

from enum import StrEnum


class ActionType(StrEnum):
    """What the responder can do. Only ``scale_out`` and ``rollback`` change the fleet."""

    SCALE_OUT = "scale_out"
    ROLLBACK = "rollback"
    NOTIFY = "notify"
    RECORD_RECOVERY = "record_recovery"


#: Actions that change the fleet and therefore pass the safety rails (dry run, kill switch, rate limit).
FLEET_CHANGING = frozenset({ActionType.SCALE_OUT, ActionType.ROLLBACK})
