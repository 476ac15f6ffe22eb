"""What the safety rails remember per endpoint: the last scale-out and the recent actions.

Apart from :mod:`fleetops.remediation.decide`: the remediation state table reads and writes it, and pre-scaling
uses that table without loading alarm parsing and decisions.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class RailState(BaseModel):
    """Per-endpoint memory of the safety rails (stored in the remediation state table)."""

    model_config = ConfigDict(frozen=True)

    last_scale_out_at: datetime | None = None
    recent_actions: tuple[datetime, ...] = ()

    def actions_since(self, since: datetime) -> int:
        return sum(1 for at in self.recent_actions if at > since)
