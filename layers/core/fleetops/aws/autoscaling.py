"""Application Auto Scaling for SageMaker variants: scalable targets and scheduled actions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from fleetops.aws import clients
from fleetops.aws.retry import RetryPolicy, call_with_retry
from fleetops.capacity import ScalableTarget, ScheduledAction

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient

NAMESPACE: Final[Literal["sagemaker"]] = "sagemaker"
DIMENSION: Final[Literal["sagemaker:variant:DesiredInstanceCount"]] = "sagemaker:variant:DesiredInstanceCount"


def resource_id(endpoint_name: str, variant_name: str) -> str:
    return f"endpoint/{endpoint_name}/variant/{variant_name}"


class AutoScaling:
    """Thin adapter; a ConcurrentUpdateException is waited out per ``retry`` (throttling is botocore's)."""

    def __init__(self, client: ApplicationAutoScalingClient | None = None, retry: RetryPolicy | None = None) -> None:
        self._client = client or clients.client("application-autoscaling")
        self._retry = retry or RetryPolicy()

    def _call(self, operation: str, **kwargs: Any) -> Any:
        return call_with_retry(self._retry, getattr(self._client, operation), **kwargs)

    def get_target(self, endpoint_name: str, variant_name: str) -> ScalableTarget | None:
        found = self._call(
            "describe_scalable_targets",
            ServiceNamespace=NAMESPACE,
            ResourceIds=[resource_id(endpoint_name, variant_name)],
            ScalableDimension=DIMENSION,
        )["ScalableTargets"]
        if not found:
            return None
        return ScalableTarget(min_capacity=found[0]["MinCapacity"], max_capacity=found[0]["MaxCapacity"])

    def set_capacity(self, endpoint_name: str, variant_name: str, min_capacity: int, max_capacity: int) -> None:
        """Set MinCapacity/MaxCapacity of an already registered target (scale-in stays with the autoscaler)."""
        self._call(
            "register_scalable_target",
            ServiceNamespace=NAMESPACE,
            ResourceId=resource_id(endpoint_name, variant_name),
            ScalableDimension=DIMENSION,
            MinCapacity=min_capacity,
            MaxCapacity=max_capacity,
        )

    def list_scheduled_actions(self, endpoint_name: str, variant_name: str, prefix: str) -> list[ScheduledAction]:
        actions: list[ScheduledAction] = []
        kwargs: dict[str, Any] = {
            "ServiceNamespace": NAMESPACE,
            "ResourceId": resource_id(endpoint_name, variant_name),
            "ScalableDimension": DIMENSION,
        }
        while True:
            page = self._call("describe_scheduled_actions", **kwargs)
            for raw in page["ScheduledActions"]:
                if not raw["ScheduledActionName"].startswith(prefix):
                    continue
                target = raw.get("ScalableTargetAction", {})
                actions.append(
                    ScheduledAction(
                        name=raw["ScheduledActionName"],
                        endpoint_name=endpoint_name,
                        variant_name=variant_name,
                        schedule=raw["Schedule"],
                        timezone=raw.get("Timezone") or "UTC",
                        min_capacity=int(target.get("MinCapacity", 0)),
                        max_capacity=int(target.get("MaxCapacity", 0)),
                    )
                )
            if not page.get("NextToken"):
                return actions
            kwargs["NextToken"] = page["NextToken"]

    def put_scheduled_action(self, action: ScheduledAction) -> None:
        self._call(
            "put_scheduled_action",
            ServiceNamespace=NAMESPACE,
            ScheduledActionName=action.name,
            ResourceId=resource_id(action.endpoint_name, action.variant_name),
            ScalableDimension=DIMENSION,
            Schedule=action.schedule,
            Timezone=action.timezone,
            ScalableTargetAction={"MinCapacity": action.min_capacity, "MaxCapacity": action.max_capacity},
        )

    def delete_scheduled_action(self, action: ScheduledAction) -> None:
        self._call(
            "delete_scheduled_action",
            ServiceNamespace=NAMESPACE,
            ScheduledActionName=action.name,
            ResourceId=resource_id(action.endpoint_name, action.variant_name),
            ScalableDimension=DIMENSION,
        )
