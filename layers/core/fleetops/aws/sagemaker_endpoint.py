"""Read a SageMaker endpoint and its config into an :class:`~fleetops.rollout.plan.EndpointSnapshot`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3

from fleetops.aws.retry import RetryPolicy, call_with_retry, error_code
from fleetops.rollout.plan import EndpointSnapshot, VariantSnapshot

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


class EndpointMissingError(LookupError):
    """The endpoint does not exist (SageMaker answers a ValidationException "Could not find endpoint")."""


def read_endpoint(
    endpoint_name: str, client: SageMakerClient | None = None, retry: RetryPolicy | None = None
) -> EndpointSnapshot:
    """Describe the endpoint and its current config: status, config name and every variant.

    Examples
    --------
    >>> read_endpoint("manga-chat").variants[0].variant_name  # doctest: +SKIP
    'primary'
    """
    sagemaker = client or boto3.client("sagemaker")
    policy = retry or RetryPolicy()
    try:
        endpoint = call_with_retry(policy, sagemaker.describe_endpoint, EndpointName=endpoint_name)
    except Exception as exc:
        if error_code(exc) == "ValidationException" and "Could not find" in str(exc):
            raise EndpointMissingError(f"endpoint {endpoint_name!r} does not exist") from None
        raise
    config = call_with_retry(
        policy, sagemaker.describe_endpoint_config, EndpointConfigName=endpoint["EndpointConfigName"]
    )
    described: dict[str, Any] = {v["VariantName"]: dict(v) for v in config["ProductionVariants"]}
    variants = []
    for live in endpoint.get("ProductionVariants", []):
        spec: dict[str, Any] = described.get(live["VariantName"], {})
        variants.append(
            VariantSnapshot(
                variant_name=live["VariantName"],
                model_name=str(spec.get("ModelName", "")),
                instance_type=str(spec.get("InstanceType", "")),
                instance_count=int(live.get("CurrentInstanceCount", spec.get("InitialInstanceCount", 1))),
                weight=float(live.get("CurrentWeight", spec.get("InitialVariantWeight", 1.0))),
            )
        )
    return EndpointSnapshot(
        endpoint_name=endpoint_name,
        status=endpoint["EndpointStatus"],
        endpoint_config_name=endpoint["EndpointConfigName"],
        variants=tuple(variants),
    )
