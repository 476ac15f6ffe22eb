"""What users were routed by, read all along: an endpoint's weights and instance counts every few milliseconds.

A rollout test asserts on these samples rather than on the workflow's own record, so a canary that was sized
after its users moved, or users that reached a share before anyone approved it, shows as it would to a user::

    with sampled("manga-chat") as samples:
        ...  # the rollout runs
    canary_when_users_moved(samples)  # [(25.0, 1), (50.0, 2)]
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

import boto3

from devtools.background import repeating

CANARY = "canary"


@dataclass(frozen=True)
class Sample:
    """One DescribeEndpoint: per variant, (CurrentInstanceCount, CurrentWeight)."""

    variants: dict[str, tuple[int, float]]

    def canary_share(self) -> float:
        total = sum(w for _, w in self.variants.values()) or 1.0
        return round(100 * self.variants.get(CANARY, (0, 0.0))[1] / total, 4)

    def count(self, variant: str) -> int:
        return self.variants.get(variant, (0, 0.0))[0]

    def total(self) -> int:
        return sum(n for n, _ in self.variants.values())


def sampled(endpoint: str, every_s: float = 0.05) -> AbstractContextManager[list[Sample]]:
    """Read the endpoint every ``every_s`` while the block runs (the weights users were routed by, the instances)."""
    sagemaker = boto3.client("sagemaker")

    def sample(_: int) -> Sample:
        described = sagemaker.describe_endpoint(EndpointName=endpoint)["ProductionVariants"]
        return Sample({v["VariantName"]: (v.get("CurrentInstanceCount", 0), v["CurrentWeight"]) for v in described})

    return repeating(sample, every_s=every_s, join_s=5, name="endpoint-sampler")


def canary_when_users_moved(samples: list[Sample]) -> list[tuple[float, int]]:
    """(canary share, canary instances) at the first look after each change of the share users were routed by.

    The canary grows for a step while users are still at the step before (sized first, then moved), so its count
    when a share first shows is what met that share's users.
    """
    moves: list[tuple[float, int]] = []
    for s in samples:
        if s.canary_share() > 0 and (not moves or moves[-1][0] != s.canary_share()):
            moves.append((s.canary_share(), s.count(CANARY)))
    return moves
