"""What a canary rollout, executed from its ASL file on the moto server, does to capacity and when users move.

Emulated by this project (see ``conftest.py``): SageMaker's Updating -> InService transitions, which make an
asked-for instance count serve only after the update's time. Application Auto Scaling is moto's (it registers
targets and policies but scales nothing). A sampler thread (devtools.endpoint_sampler) reads DescribeEndpoint all
along: the endpoint's weights and instance counts as users would have met them.
"""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.endpoint_sampler import canary_when_users_moved, sampled
from devtools.restored_config import serving_restored
from fleetops.aws.autoscaling import DIMENSION, NAMESPACE, resource_id
from tests.integration.workflows.conftest import HEALTHY, rollout_request

PROD = "manga-chat-prod"  # devtools/workflow_fleet.yaml: prod, canary_limits max 1
TRACKING = {
    "TargetValue": 3.0,
    "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
    "ScaleOutCooldown": 60,
    "ScaleInCooldown": 600,
}


def scale_primary(endpoint: str, count: int) -> None:
    """The primary serving ``count`` instances (as its scaling left it), with its target and target tracking."""
    sagemaker = boto3.client("sagemaker")
    sagemaker.update_endpoint_weights_and_capacities(
        EndpointName=endpoint, DesiredWeightsAndCapacities=[{"VariantName": wf.PRIMARY, "DesiredInstanceCount": count}]
    )
    deadline = time.monotonic() + 10
    while sagemaker.describe_endpoint(EndpointName=endpoint)["EndpointStatus"] != "InService":
        assert time.monotonic() < deadline, "the emulated update did not finish"
        time.sleep(0.1)
    autoscaling: Any = boto3.client("application-autoscaling")  # untyped: the request is built from a dict
    target = {
        "ServiceNamespace": NAMESPACE,
        "ResourceId": resource_id(endpoint, wf.PRIMARY),
        "ScalableDimension": DIMENSION,
    }
    autoscaling.register_scalable_target(**target, MinCapacity=2, MaxCapacity=12)
    autoscaling.put_scaling_policy(
        **target,
        PolicyName=f"invocations-{endpoint}-{wf.PRIMARY}",
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration=TRACKING,
    )


def canary_target(endpoint: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The canary's scalable target (None: none) and its scaling policies."""
    autoscaling: Any = boto3.client("application-autoscaling")
    rid = resource_id(endpoint, "canary")
    targets = autoscaling.describe_scalable_targets(ServiceNamespace=NAMESPACE, ResourceIds=[rid])["ScalableTargets"]
    policies = autoscaling.describe_scaling_policies(ServiceNamespace=NAMESPACE, ResourceId=rid)["ScalingPolicies"]
    return (targets[0] if targets else None), policies


def test_the_canary_follows_each_steps_weight_beside_a_primary_of_6_and_its_target_lives_as_long_as_it_does(
    rollout: wf.RolloutWorkflow,
) -> None:
    scale_primary(wf.ENDPOINT, 6)
    request = rollout_request(steps=[5, 25, 50, 100], approval_steps=[50])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY), sampled(wf.ENDPOINT) as samples:
        execution = wf.start_rollout(request)
        link = wf.approval_link(rollout, "approve", execution)
        # Waiting for the 50 % decision: users stay at 25 %, the canary has its target at step 25's size (2) with
        # the primary's target tracking, up to canary_limits (4 in the emulated fleet.yaml).
        assert wf.canary_weight() == pytest.approx(25)
        target, policies = canary_target(wf.ENDPOINT)
        assert target is not None and (target["MinCapacity"], target["MaxCapacity"]) == (2, 4)
        assert [(p["PolicyName"], p["PolicyType"]) for p in policies] == [
            (f"invocations-{wf.ENDPOINT}-canary", "TargetTrackingScaling")
        ]
        copied = policies[0]["TargetTrackingScalingPolicyConfiguration"]
        assert {k: copied[k] for k in TRACKING} == TRACKING
        assert wf.submit(link)["statusCode"] == 200
        result = wf.wait(execution, timeout_s=90)

    assert result["status"] == "SUCCEEDED", result
    # Each step's share of what served users (6, then 6 + the canary's), rounded up, before users moved: 5 % of 6
    # is 1; 25 % of 7 is 2; 50 % of 8 is 4. Users never met a canary smaller than its step's size.
    assert canary_when_users_moved(samples) == [(5.0, 1), (25.0, 2), (50.0, 4)], canary_when_users_moved(samples)
    at_share = {share: min(s.count("canary") for s in samples if s.canary_share() == share) for share in (5, 25, 50)}
    assert at_share == {5: 1, 25: 2, 50: 4}
    assert min(s.total() for s in samples) >= 6
    # The promotion ran on the primary's instances, grown back to what served users (6 + 4) first.
    [only] = boto3.client("sagemaker").describe_endpoint(EndpointName=wf.ENDPOINT)["ProductionVariants"]
    assert (only["VariantName"], only["CurrentInstanceCount"]) == (wf.PRIMARY, 10)
    history = wf.state_history(execution)
    assert history.index("GrowPrimary") < history.index("ReleaseCanaryTarget") < history.index("Promote")
    # The canary's target and policy went with it; the primary's stay.
    assert canary_target(wf.ENDPOINT) == (None, [])
    primary = boto3.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace=NAMESPACE, ResourceId=resource_id(wf.ENDPOINT, wf.PRIMARY)
    )["ScalingPolicies"]
    assert len(primary) == 1


def test_a_prod_rollout_asks_before_the_promotion_with_users_at_the_last_step_and_promotes_on_the_primary(
    rollout: wf.RolloutWorkflow,
) -> None:
    wf.create_endpoint(PROD)  # 2 instances; fleet.yaml makes a person approve its promotion
    request = rollout_request(endpoint_name=PROD, steps=[5, 25, 100], approval_steps=[100])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY, endpoint=PROD), sampled(PROD) as samples:
        execution = wf.start_rollout(request)
        link = wf.approval_link(rollout, "approve", execution)
        # At the decision: users on the new model are the 25 % step's, never 100 %.
        waiting = list(samples)
        assert wf.canary_weight(endpoint=PROD) == pytest.approx(25)
        assert "Promote" not in wf.state_history(execution) and "GrowPrimary" not in wf.state_history(execution)
        assert wf.submit(link)["statusCode"] == 200
        result = wf.wait(execution, timeout_s=90)

    assert result["status"] == "SUCCEEDED", result
    assert max(s.canary_share() for s in waiting) == 25.0
    # Never more than the last step's share on the canary, before or after the decision: the promotion moved
    # every user onto the primary's instances (grown to what served users: 2 + 1) with the new model.
    assert max(s.canary_share() for s in samples) == 25.0
    described = boto3.client("sagemaker").describe_endpoint(EndpointName=PROD)
    [only] = described["ProductionVariants"]
    assert (only["VariantName"], only["CurrentInstanceCount"]) == (wf.PRIMARY, 3)
    config = boto3.client("sagemaker").describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
    assert config["ProductionVariants"][0]["ModelName"] == f"{PROD}-llama-q4-v7-final-model"
    history = wf.state_history(execution)
    assert history.count("SetWeights") == 2 and history.index("RequestApproval") < history.index("GrowPrimary")


def test_a_step_the_canary_limit_cannot_size_is_refused_before_its_weights_change_and_rolls_back(
    rollout: wf.RolloutWorkflow,
) -> None:
    scale_primary(wf.ENDPOINT, 6)
    request = rollout_request(steps=[5, 25, 50, 75, 100])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY), sampled(wf.ENDPOINT) as samples:
        execution = wf.start_rollout(request)
        result = wf.wait(execution, timeout_s=90)

    # What the operator reads: the step, the instances it needed (75 % of 6 + 4) and the limit.
    assert (result["status"], result["error"]) == ("FAILED", "RolledBack"), result
    assert result["cause"].startswith("CanaryLimitError"), result["cause"]
    assert "step 75 % needs 8 canary instances" in result["cause"], result["cause"]
    assert "canary_limits.max_instance_count 4" in result["cause"], result["cause"]
    # No user was moved to 75 %: the weights stopped at 50 %, then went back to the primary.
    assert max(s.canary_share() for s in samples) == 50.0
    assert wf.state_history(execution).count("SetWeights") == 3
    # Back on v6's config as the rollback's copy of it: the primary keeps the 6 instances it scaled out to.
    described = serving_restored(wf.ENDPOINT, "manga-chat-v6-config")
    assert [(v["VariantName"], v["CurrentInstanceCount"]) for v in described["ProductionVariants"]] == [(wf.PRIMARY, 6)]
    # The canary's target went before the rollback removed the variant.
    assert canary_target(wf.ENDPOINT) == (None, [])


def test_a_rollback_started_by_an_alarm_mid_rollout_releases_the_canarys_target_before_the_canary_goes(
    rollout: wf.RolloutWorkflow,
) -> None:
    scale_primary(wf.ENDPOINT, 6)
    request = rollout_request(steps=[5, 25, 100], approval_steps=[25])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(request)
        wf.approval_link(rollout, "approve", execution)  # waits before 25 %, users at 5 % on a canary of 1
    target, policies = canary_target(wf.ENDPOINT)
    assert target is not None and target["MinCapacity"] == 1 and len(policies) == 1

    # What the alarm responder starts on a canary alarm (fleetops.remediation.rollback_workflow).
    responder = {
        "endpoint_name": wf.ENDPOINT,
        "rollback_id": "oom-canary-1",
        "canary_variant_name": "canary",
        "abort_only": True,
        "reason": "OomCaught on the canary",
        "requested_by": "alarm_responder",
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 10},
    }
    result = wf.wait(wf.start(rollout.rollback_arn, responder, name="oom-canary-1"), timeout_s=60)

    assert result["status"] == "SUCCEEDED", result
    history = wf.state_history(result["executionArn"])
    assert history.index("ReleaseCanaryTarget") < history.index("RestoreConfig"), history
    assert canary_target(wf.ENDPOINT) == (None, [])
    described = serving_restored(wf.ENDPOINT, "manga-chat-v6-config")
    assert [(v["VariantName"], v["CurrentInstanceCount"]) for v in described["ProductionVariants"]] == [(wf.PRIMARY, 6)]
