"""The safety rails: the playbook's limits (``rails:``) and what the rails remember per endpoint.

Apart from :mod:`fleetops.remediation.decide` and the rest of the playbook: the remediation state table reads and
writes the memory, and pre-scaling uses that table and the raise hold without loading alarm parsing, decisions or
the playbook's alarm models.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from fleetops.validation import StrictModel


class Rails(StrictModel):
    cooldown_seconds: int = Field(ge=0, description="no second scale-out of an endpoint within this time")
    max_actions_per_hour: int = Field(ge=1, description="fleet-changing actions per endpoint per rolling hour")
    lease_ttl_seconds: int = Field(ge=10, le=900)
    raise_hold_seconds: int = Field(
        default=900,
        ge=60,
        le=86400,
        description="a scale-out's MinCapacity raise is released once its alarms have been OK this long",
    )

    @property
    def raise_hold(self) -> timedelta:
        """``raise_hold_seconds`` as the ``hold`` of :func:`fleetops.remediation.raises.release_due`."""
        return timedelta(seconds=self.raise_hold_seconds)


class RailState(BaseModel):
    """Per-endpoint memory of the safety rails (stored in the remediation state table)."""

    model_config = ConfigDict(frozen=True)

    last_scale_out_at: datetime | None = None
    recent_actions: tuple[datetime, ...] = ()

    def actions_since(self, since: datetime) -> int:
        return sum(1 for at in self.recent_actions if at > since)
