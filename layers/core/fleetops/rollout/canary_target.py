"""The canary variant's scalable target while it exists (the Application Auto Scaling adapter of a rollout).

A canary serving a step's share of users scales like the primary: the rollout registers its scalable target
(MinCapacity = the step's size, MaxCapacity = ``canary_limits.max_instance_count``) and gives it the primary's
target-tracking policies, so a release night's growth during a bake reaches the canary too. The target goes
(its policies first) before the variant is removed: SageMaker
keeps no scaling of a variant that no longer exists, and a stale target would fail the next rollout's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetops.aws import clients
from fleetops.aws.autoscaling import DIMENSION, NAMESPACE, AutoScaling, resource_id
from fleetops.aws.retry import RetryPolicy, call_with_retry

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient


def canary_policy_name(policy_name: str, baseline_variant: str, canary_variant: str) -> str:
    """The canary's copy of a primary policy: the variant's name in it swapped, else the canary's appended.

    Examples
    --------
    >>> canary_policy_name("fleet-invocations-manga-chat-primary", "primary", "canary")
    'fleet-invocations-manga-chat-canary'
    >>> canary_policy_name("tracking", "primary", "canary")
    'tracking-canary'
    """
    suffix = f"-{baseline_variant}"
    stem = policy_name[: -len(suffix)] if policy_name.endswith(suffix) else policy_name
    return f"{stem}-{canary_variant}"


class CanaryTarget:
    """Register, resize and release the canary's scalable target; copy the primary's target tracking onto it."""

    def __init__(self, client: ApplicationAutoScalingClient | None = None, retry: RetryPolicy | None = None) -> None:
        self._client = client or clients.client("application-autoscaling")
        self._retry = retry or RetryPolicy()
        self._targets = AutoScaling(self._client, self._retry)

    def _call(self, operation: str, **kwargs: Any) -> Any:
        return call_with_retry(self._retry, getattr(self._client, operation), **kwargs)

    def exists(self, endpoint_name: str, variant_name: str) -> bool:
        return self._targets.get_target(endpoint_name, variant_name) is not None

    def hold(self, endpoint_name: str, canary: str, baseline: str, min_capacity: int, max_capacity: int) -> bool:
        """Register (or resize) the canary's target; while it has no target tracking, copy the baseline's.

        Returns whether the target was new.
        """
        new = not self.exists(endpoint_name, canary)
        self._targets.set_capacity(endpoint_name, canary, min_capacity, max_capacity)
        if new or not self.target_tracking(endpoint_name, canary):
            for policy in self.target_tracking(endpoint_name, baseline):
                self._call(
                    "put_scaling_policy",
                    PolicyName=canary_policy_name(policy["PolicyName"], baseline, canary),
                    ServiceNamespace=NAMESPACE,
                    ResourceId=resource_id(endpoint_name, canary),
                    ScalableDimension=DIMENSION,
                    PolicyType="TargetTrackingScaling",
                    TargetTrackingScalingPolicyConfiguration=policy["TargetTrackingScalingPolicyConfiguration"],
                )
        return new

    def target_tracking(self, endpoint_name: str, variant_name: str) -> list[dict[str, Any]]:
        """The variant's target-tracking policies (step scaling is the alarm responder's, not copied)."""
        policies: list[dict[str, Any]] = []
        page: dict[str, Any] = {}
        while True:
            answer = self._call(
                "describe_scaling_policies",
                ServiceNamespace=NAMESPACE,
                ResourceId=resource_id(endpoint_name, variant_name),
                ScalableDimension=DIMENSION,
                **page,
            )
            policies += [p for p in answer["ScalingPolicies"] if p.get("PolicyType") == "TargetTrackingScaling"]
            if not answer.get("NextToken"):
                return policies
            page = {"NextToken": answer["NextToken"]}

    def max_capacity(self, endpoint_name: str, variant_name: str) -> int | None:
        target = self._targets.get_target(endpoint_name, variant_name)
        return None if target is None else target.max_capacity

    def release(self, endpoint_name: str, canary: str) -> bool:
        """Delete the canary's policies and deregister its target; returns whether there was one."""
        if not self.exists(endpoint_name, canary):
            return False
        # AWS deletes them with the target; deleted first, so no emulator or partial failure leaves one behind.
        for policy in self.target_tracking(endpoint_name, canary):
            self._call(
                "delete_scaling_policy",
                PolicyName=policy["PolicyName"],
                ServiceNamespace=NAMESPACE,
                ResourceId=resource_id(endpoint_name, canary),
                ScalableDimension=DIMENSION,
            )
        self._call(
            "deregister_scalable_target",
            ServiceNamespace=NAMESPACE,
            ResourceId=resource_id(endpoint_name, canary),
            ScalableDimension=DIMENSION,
        )
        return True
