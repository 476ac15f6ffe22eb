"""Set a SageMaker variant's traffic weight (the responder's canary fallback while no rollback workflow exists)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3

from fleetops.aws.retry import RetryPolicy, call_with_retry

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


class VariantWeights:
    """Read and change production-variant weights through ``UpdateEndpointWeightsAndCapacities``.

    Examples
    --------
    >>> VariantWeights().set_weight("manga-chat", "canary", 0.0)  # doctest: +SKIP
    {'canary': 0.1}
    """

    def __init__(self, client: SageMakerClient | None = None, retry: RetryPolicy | None = None) -> None:
        self._client: SageMakerClient = client or boto3.client("sagemaker")
        self._retry = retry or RetryPolicy()

    def weights(self, endpoint_name: str) -> dict[str, float]:
        described = call_with_retry(self._retry, self._client.describe_endpoint, EndpointName=endpoint_name)
        return {
            v["VariantName"]: float(v.get("CurrentWeight", v.get("DesiredWeight", 0.0)))
            for v in described.get("ProductionVariants", [])
        }

    def set_weight(self, endpoint_name: str, variant_name: str, weight: float) -> dict[str, float]:
        """Change one variant's weight (others keep theirs); returns the weights before the change."""
        before = self.weights(endpoint_name)
        if variant_name not in before:
            raise ValueError(f"endpoint {endpoint_name!r} has no variant {variant_name!r}; it has {sorted(before)}")
        call_with_retry(
            self._retry,
            self._client.update_endpoint_weights_and_capacities,
            EndpointName=endpoint_name,
            DesiredWeightsAndCapacities=[{"VariantName": variant_name, "DesiredWeight": weight}],
        )
        return before
