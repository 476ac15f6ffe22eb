"""The one SageMaker endpoint adapter: read an endpoint, wait until it is InService, change variant weights.

SageMaker rejects changes while an endpoint is ``Updating`` or ``SystemUpdating``; writers holding the
endpoint lease call :func:`wait_in_service` first and defer when it does not settle in time.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fleetops.aws import clients
from fleetops.aws.retry import RetryPolicy, call_with_retry, error_code
from fleetops.endpoint import EndpointSnapshot, VariantSnapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_sagemaker import SageMakerClient


class EndpointMissingError(LookupError):
    """The endpoint does not exist (SageMaker answers a ValidationException "Could not find endpoint")."""


def read_endpoint(endpoint_name: str, client: SageMakerClient | None = None) -> EndpointSnapshot:
    """Describe the endpoint and its current config: status, config name and every variant.

    Reads are never refused as "in progress", so botocore's own retries are all they need.

    Examples
    --------
    >>> class SageMaker:  # in-memory stand-in: live counts and weights, and the config's model and instance type
    ...     def describe_endpoint(self, EndpointName):
    ...         live = {"VariantName": "primary", "CurrentInstanceCount": 3, "CurrentWeight": 1.0}
    ...         return {"EndpointStatus": "InService", "EndpointConfigName": "c1", "ProductionVariants": [live]}
    ...     def describe_endpoint_config(self, EndpointConfigName):
    ...         spec = {"VariantName": "primary", "ModelName": "manga-chat-v7", "InstanceType": "ml.g5.2xlarge"}
    ...         return {"ProductionVariants": [spec]}
    >>> read_endpoint("manga-chat", client=SageMaker()).variants  # doctest: +NORMALIZE_WHITESPACE
    (VariantSnapshot(variant_name='primary', model_name='manga-chat-v7', instance_type='ml.g5.2xlarge',
                     instance_count=3, weight=1.0),)
    """
    sagemaker = client or clients.client("sagemaker")
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_name)
    except Exception as exc:
        if error_code(exc) == "ValidationException" and "Could not find" in str(exc):
            raise EndpointMissingError(f"endpoint {endpoint_name!r} does not exist") from None
        raise
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
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


IN_SERVICE = "InService"
#: States that will not turn into InService by waiting.
TERMINAL = frozenset({"Failed", "OutOfService", "Deleting"})


class EndpointNotReadyError(RuntimeError):
    """The endpoint did not reach InService in time, or is in a state waiting cannot fix."""

    def __init__(self, endpoint_name: str, status: str) -> None:
        self.endpoint_name = endpoint_name
        self.status = status
        super().__init__(f"endpoint {endpoint_name!r} is {status}, not {IN_SERVICE}")


def wait_in_service(
    endpoint_name: str,
    client: SageMakerClient | None = None,
    timeout_s: float = 30.0,
    max_wait_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll ``DescribeEndpoint`` until ``InService``; return the status seen.

    Parameters
    ----------
    endpoint_name
        The SageMaker endpoint.
    client
        A SageMaker client; ``None`` builds a default one.
    timeout_s
        Give up after this long (keep it well inside the Lambda timeout).
    max_wait_s
        Upper bound of one exponential back-off pause.
    sleep
        Injected for tests.

    Raises
    ------
    EndpointNotReadyError
        On a terminal state, or when the endpoint is still not InService after ``timeout_s``.

    Examples
    --------
    >>> class SageMaker:  # in-memory stand-in: an endpoint that finishes updating on the third look
    ...     def __init__(self):
    ...         self.statuses = iter(["Updating", "Updating", "InService"])
    ...     def describe_endpoint(self, EndpointName):
    ...         return {"EndpointStatus": next(self.statuses)}
    >>> pauses = []
    >>> wait_in_service("manga-chat", client=SageMaker(), timeout_s=20, sleep=pauses.append)
    'InService'
    >>> len(pauses)
    2
    """
    sm: SageMakerClient = client or clients.client("sagemaker")

    def status() -> str:
        value = sm.describe_endpoint(EndpointName=endpoint_name)["EndpointStatus"]
        if value in TERMINAL:
            raise EndpointNotReadyError(endpoint_name, value)
        return value

    # Imported here as in call_with_retry: only a call that waits pays for tenacity.
    from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_exponential

    retrying = Retrying(
        retry=retry_if_result(lambda s: s != IN_SERVICE),
        stop=stop_after_delay(timeout_s),
        wait=wait_exponential(multiplier=0.25, max=max_wait_s),
        sleep=sleep,
    )
    try:
        result: str = retrying(status)
    except RetryError as exc:
        last = exc.last_attempt.result() if not exc.last_attempt.failed else "unknown"
        raise EndpointNotReadyError(endpoint_name, str(last)) from exc
    return result


class VariantWeights:
    """Read production variants (weights, instances serving) and change weights through
    ``UpdateEndpointWeightsAndCapacities``.

    Examples
    --------
    >>> class SageMaker:  # in-memory stand-in: current weights and counts, and the updates asked for
    ...     def __init__(self):
    ...         self.updates = []
    ...     def describe_endpoint(self, EndpointName):
    ...         live = {"primary": (0.9, 6), "canary": (0.1, 1)}
    ...         return {"ProductionVariants": [
    ...             {"VariantName": k, "CurrentWeight": w, "CurrentInstanceCount": n} for k, (w, n) in live.items()
    ...         ]}
    ...     def update_endpoint_weights_and_capacities(self, EndpointName, DesiredWeightsAndCapacities):
    ...         self.updates.append(DesiredWeightsAndCapacities)
    >>> sagemaker = SageMaker()
    >>> VariantWeights(client=sagemaker).set_weight("manga-chat", "canary", 0.0)  # returns the weights before
    {'primary': 0.9, 'canary': 0.1}
    >>> sagemaker.updates
    [[{'VariantName': 'canary', 'DesiredWeight': 0.0}]]
    >>> VariantWeights(client=sagemaker).instance_count("manga-chat", "primary")
    6
    """

    def __init__(self, client: SageMakerClient | None = None, retry: RetryPolicy | None = None) -> None:
        self._client: SageMakerClient = client or clients.client("sagemaker")
        self._retry = retry or RetryPolicy()

    def weights(self, endpoint_name: str) -> dict[str, float]:
        described = self._client.describe_endpoint(EndpointName=endpoint_name)
        return {
            v["VariantName"]: float(v.get("CurrentWeight", v.get("DesiredWeight", 0.0)))
            for v in described.get("ProductionVariants", [])
        }

    def instance_count(self, endpoint_name: str, variant_name: str) -> int | None:
        """The variant's ``CurrentInstanceCount``: the instances it runs now, whatever MinCapacity says.

        ``None`` when SageMaker does not say (no such variant, or an endpoint still being created); the
        caller decides what to fall back to. Errors of the call itself propagate.
        """
        described = self._client.describe_endpoint(EndpointName=endpoint_name)
        for variant in described.get("ProductionVariants", []):
            if variant["VariantName"] == variant_name:
                count = variant.get("CurrentInstanceCount")
                return int(count) if count is not None else None
        return None

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
