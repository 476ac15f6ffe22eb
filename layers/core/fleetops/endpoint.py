"""What the control plane knows about a SageMaker endpoint: its variants as described, and who holds its lease."""

from __future__ import annotations

from dataclasses import dataclass

from fleetops.validation import StrictModel


class VariantSnapshot(StrictModel):
    """One production variant as the endpoint and its config describe it."""

    variant_name: str
    model_name: str
    instance_type: str
    instance_count: int
    weight: float


class EndpointSnapshot(StrictModel):
    endpoint_name: str
    status: str
    endpoint_config_name: str
    variants: tuple[VariantSnapshot, ...]


@dataclass(frozen=True)
class LeaseInfo:
    """The lease row as stored: who holds it and until when (epoch seconds).

    A workflow holder also records its execution and where it is taking the endpoint, so a rollback can
    abort a rollout (stop it, return to the config it started from) and keep its own decision across passes.
    """

    endpoint_name: str
    holder: str
    expires_at: int
    execution_arn: str | None = None
    return_config: str | None = None
    restore_pointer: str | None = None
    fence: int = 0
