"""A variant's instance count on the live endpoint (the SageMaker adapter of the rollout's capacity task)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetops.aws import clients
from fleetops.aws.retry import RetryPolicy, call_with_retry, is_endpoint_updating

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


class EndpointCapacity:
    """DescribeEndpoint, and UpdateEndpointWeightsAndCapacities for one variant's count (its weight untouched).

    Examples
    --------
    >>> class SageMaker:  # in-memory stand-in: the requests it was sent
    ...     sent = []
    ...     def update_endpoint_weights_and_capacities(self, **request):
    ...         self.sent.append(request)
    >>> sagemaker = SageMaker()
    >>> EndpointCapacity(client=sagemaker).set_count("e", "canary", 4)
    >>> sagemaker.sent
    [{'EndpointName': 'e', 'DesiredWeightsAndCapacities': [{'VariantName': 'canary', 'DesiredInstanceCount': 4}]}]
    """

    def __init__(self, client: SageMakerClient | None = None, retry: RetryPolicy | None = None) -> None:
        self._client: SageMakerClient = client or clients.client("sagemaker")
        self._retry = retry or RetryPolicy()

    def describe(self, endpoint_name: str) -> dict[str, Any]:
        return dict(self._client.describe_endpoint(EndpointName=endpoint_name))

    def set_count(self, endpoint_name: str, variant_name: str, count: int) -> None:
        try:
            call_with_retry(
                self._retry,
                self._client.update_endpoint_weights_and_capacities,
                EndpointName=endpoint_name,
                DesiredWeightsAndCapacities=[{"VariantName": variant_name, "DesiredInstanceCount": count}],
            )
        except Exception as exc:
            # Still updating (autoscaling reaching a new MinCapacity, say): the next look asks again if needed.
            if not is_endpoint_updating(exc):
                raise
