"""How a workflow waits while SageMaker applies a change to an endpoint: a rollout's steps and a rollback's alike."""

from __future__ import annotations

from pydantic import Field

from fleetops.validation import StrictModel


class InServiceSettings(StrictModel):
    """Bounded polling with backoff while SageMaker applies a change."""

    first_wait_seconds: int = Field(default=30, ge=1, le=600)
    max_wait_seconds: int = Field(default=120, ge=1, le=600)
    timeout_seconds: int = Field(default=3600, ge=1, le=3 * 3600, description="bounds the lease with the rest")

    def waits(self) -> list[int]:
        """Pauses between DescribeEndpoint calls: doubling, capped, summing to at least the timeout.

        Examples
        --------
        >>> InServiceSettings(first_wait_seconds=10, max_wait_seconds=40, timeout_seconds=100).waits()
        [10, 20, 40, 40]
        """
        waits: list[int] = []
        wait = self.first_wait_seconds
        while sum(waits) < self.timeout_seconds:
            waits.append(min(wait, self.max_wait_seconds))
            wait *= 2
        return waits
