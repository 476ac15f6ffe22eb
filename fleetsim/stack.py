"""What the deployed stack would run, read from ``template.yaml`` (and its nested templates), not restated here:
the target-tracking policies of a variant and how often the pre-scale reconciler runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from devtools.cfn_yaml import load, parameter_values, stack_resources

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
STACK_NAME = "manga-llm-fleet"
INVOCATIONS_PER_INSTANCE = "SageMakerVariantInvocationsPerInstance"
CONCURRENT_REQUESTS_PER_MODEL = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
TRACKED_METRICS = (INVOCATIONS_PER_INSTANCE, CONCURRENT_REQUESTS_PER_MODEL)
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours)\)$")


class StackError(ValueError):
    """The template does not declare what the simulator needs for this endpoint and variant."""


@dataclass(frozen=True)
class TargetTrackingSpec:
    """A ``TargetTrackingScalingPolicyConfiguration`` on one of :data:`TRACKED_METRICS`.

    Attributes
    ----------
    metric
        The ``PredefinedMetricType`` it tracks.
    target
        ``TargetValue`` in that metric's unit: invocations per instance per minute for
        :data:`INVOCATIONS_PER_INSTANCE`, concurrent requests per instance for :data:`CONCURRENT_REQUESTS_PER_MODEL`.
    scale_out_cooldown_s, scale_in_cooldown_s
        The policy's cooldowns (Application Auto Scaling's default of 300 s where the template gives none).
    """

    metric: str
    target: float
    scale_out_cooldown_s: int
    scale_in_cooldown_s: int


def target_tracking(endpoint: str, variant: str, template: Path = TEMPLATE) -> tuple[TargetTrackingSpec, ...]:
    """The variant's target-tracking policies as the template declares them, in template order; empty when none.

    Raises
    ------
    StackError
        When a policy tracks a metric the simulator does not model.
    """
    resource_id = f"endpoint/{endpoint}/variant/{variant}"
    parameters = {"RemediatedEndpointName": endpoint, "PrimaryVariantName": variant}
    specs = []
    for policy in stack_resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy", STACK_NAME, parameters):
        props = policy.resolved()
        if props.get("ResourceId") != resource_id or props.get("PolicyType") != "TargetTrackingScaling":
            continue
        config = props["TargetTrackingScalingPolicyConfiguration"]
        metric = (config.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
        if metric not in TRACKED_METRICS:
            known = " or ".join(TRACKED_METRICS)
            raise StackError(f"{policy.path} tracks {metric!r}; the simulator models {known} only")
        specs.append(
            TargetTrackingSpec(
                metric=metric,
                target=float(config["TargetValue"]),
                scale_out_cooldown_s=int(config.get("ScaleOutCooldown", 300)),
                scale_in_cooldown_s=int(config.get("ScaleInCooldown", 300)),
            )
        )
    return tuple(specs)


def prescale_interval_s(template: Path = TEMPLATE) -> int:
    """Seconds between pre-scale reconciler runs (the ``PrescaleSchedule`` parameter's ``rate(...)``)."""
    expression = parameter_values(load(template))["PrescaleSchedule"]
    match = _RATE.match(expression.strip())
    if not match:
        raise StackError(f"PrescaleSchedule {expression!r}: the simulator reads rate(N minutes|hours) only")
    return int(match.group(1)) * (3600 if match.group(2).startswith("hour") else 60)
