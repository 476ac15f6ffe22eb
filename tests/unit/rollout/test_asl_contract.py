"""The rollout and rollback ASL files use the shared key names and every Task retries with full jitter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest

from fleetops.tables import (
    LEASE_EXECUTION_ARN,
    LEASE_EXPIRES_AT,
    LEASE_FENCE,
    LEASE_HOLDER,
    LEASE_PK,
    LEASE_RESTORE_POINTER,
    LEASE_RETURN_CONFIG,
    REGISTRY_PK,
    REGISTRY_SHA256,
)
from tests.conftest import REPO

FILES = ["canary_rollout.asl.json", "rollback.asl.json"]


def states(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO / "statemachines" / name).read_text())
    return dict(data["States"])


def tasks(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    return ((k, v) for k, v in states(name).items() if v["Type"] == "Task")


@pytest.mark.parametrize("name", FILES)
def test_lease_writes_use_the_lease_key_names_from_fleetops_tables(name: str) -> None:
    lease_writes = [
        s
        for _, s in tasks(name)
        if s["Parameters"].get("TableName") == "${LeaseTableName}" and not s["Resource"].endswith("getItem")
    ]
    takes = [s for s in lease_writes if "#exp = :exp" in s["Parameters"].get("UpdateExpression", "")]
    assert takes, "no state takes the lease"
    every_lease_key = {
        LEASE_PK,
        LEASE_HOLDER,
        LEASE_EXPIRES_AT,
        LEASE_EXECUTION_ARN,
        LEASE_RETURN_CONFIG,
        LEASE_RESTORE_POINTER,
        LEASE_FENCE,
    }
    for state in lease_writes:
        assert set(state["Parameters"]["Key"]) == {LEASE_PK}
        assert set(state["Parameters"].get("ExpressionAttributeNames", {}).values()) <= every_lease_key
    for take in takes:
        # Every take raises the fencing token and may only take a free, lapsed or own lease.
        assert "#fence = if_not_exists(#fence, :zero) + :one" in take["Parameters"]["UpdateExpression"]
        assert "#exp < :now" in take["Parameters"]["ConditionExpression"]
        names = set(take["Parameters"]["ExpressionAttributeNames"].values())
        assert {LEASE_HOLDER, LEASE_EXPIRES_AT, LEASE_FENCE} <= names


@pytest.mark.parametrize("name", FILES)
def test_every_task_retries_with_backoff_and_full_jitter_and_catches(name: str) -> None:
    for state_name, state in tasks(name):
        retries = state.get("Retry", [])
        assert retries, f"{state_name} has no Retry"
        assert all(r.get("JitterStrategy") == "FULL" and r.get("BackoffRate", 1) > 1 for r in retries), state_name
        assert state.get("Catch"), f"{state_name} has no Catch"


def next_states(state: dict[str, Any]) -> set[str]:
    """Where a Pass or Choice state can go: followed through, since both only route an error on."""
    if state["Type"] == "Choice":
        return {c["Next"] for c in state["Choices"]} | {state["Default"]}
    return {state["Next"]} if "Next" in state else set()


def ends_of_catch(every: dict[str, Any], target: str) -> set[str]:
    seen: set[str] = set()
    todo = [target]
    ends: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if every[name]["Type"] in {"Pass", "Choice"}:
            todo.extend(next_states(every[name]))
        else:
            ends.add(name)
    return ends


BEFORE_THE_LEASE = {"Validate", "CheckArtifact", "AuditPlanned", "AcquireLease"}
AFTER_THE_PROMOTION = {"UpdatePointer", "RegisterVersion", "AuditPromoted", "NotifyPromoted", "PromotedWithWarnings"}
CLEAN_UP = {"Rollback", "ReleaseLease"}


def test_every_rollout_failure_between_the_lease_and_the_promotion_rolls_back() -> None:
    every = states("canary_rollout.asl.json")
    checked = 0
    for state_name, state in tasks("canary_rollout.asl.json"):
        if state_name in BEFORE_THE_LEASE | AFTER_THE_PROMOTION | CLEAN_UP:
            continue
        catches = state["Catch"]
        if state["Parameters"].get("TableName") == "${AuditTableName}":
            # An audit put's own retry finding its record continues (tests/integration/test_audit_states.py).
            own_retry, *catches = catches
            assert (own_retry["ErrorEquals"], own_retry["Next"]) == (
                ["DynamoDB.ConditionalCheckFailedException"],
                state["Next"],
            ), state_name
        if state_name == "CheckLease":
            # A rollback that took the lease over does the rolling back; this rollout only stops.
            lost, *catches = catches
            assert (lost["ErrorEquals"], every[lost["Next"]]["Type"]) == (
                ["DynamoDB.ConditionalCheckFailedException"],
                "Fail",
            )
        ends = set().union(*(ends_of_catch(every, c["Next"]) for c in catches))
        if state_name == "CheckLease":
            # It also guards the pointer write after the promotion, where an unreadable lease keeps the release.
            ends.discard("PromotedWithWarnings")
        assert ends == {"Rollback"}, (state_name, ends)
        checked += 1
    assert checked >= 10


def test_a_rollback_releases_the_canarys_scalable_target_before_it_restores_the_config_whatever_that_answers() -> None:
    every = states("rollback.asl.json")
    into_copy = {name for name, state in every.items() if "CreateRestoreConfig" in next_states(state)}
    assert into_copy == {"CanaryTarget?", "ReleaseCanaryTarget"}
    into_restore = {name for name, state in every.items() if "RestoreConfig" in next_states(state)}
    assert into_restore == {"CreateRestoreConfig"}
    assert {c["Next"] for c in every["Action"]["Choices"]} >= {"CanaryTarget?"} and not {
        "RestoreConfig",
        "CreateRestoreConfig",
    } & {c["Next"] for c in every["Action"]["Choices"]}
    assert every["CanaryTarget?"]["Choices"] == [
        {"Variable": "$.next.step.canary_variant_name", "IsNull": False, "Next": "ReleaseCanaryTarget"}
    ]
    release = every["ReleaseCanaryTarget"]
    assert release["Parameters"]["Payload"]["action"] == "release"
    # Best effort: a failed release never keeps the canary serving.
    assert [(c["ErrorEquals"], c["Next"]) for c in release["Catch"]] == [(["States.ALL"], "CreateRestoreConfig")]
    assert release["Catch"][0]["ResultPath"] != "$.error"


def test_a_rollback_restores_a_copy_of_its_target_with_the_live_counts_built_right_before_the_update() -> None:
    """Never the target as it was created (its instance counts are that day's): the step's restore_config, built
    by the EndpointConfigFunction, is the config UpdateEndpoint names; a copy that cannot be built fails the
    rollback (audited, lease given back) instead of falling back to the old counts."""
    every = states("rollback.asl.json")
    create = every["CreateRestoreConfig"]
    assert create["Parameters"] == {
        "FunctionName": "${EndpointConfigFunctionArn}",
        "Payload.$": "$.next.step.restore_config",
    }
    assert [(c["ErrorEquals"], c["Next"]) for c in create["Catch"]] == [(["States.ALL"], "AuditFailed")]
    updates = {
        name: state["Parameters"]["EndpointConfigName.$"]
        for name, state in every.items()
        if "EndpointConfigName.$" in state.get("Parameters", {})
    }
    assert updates == {"RestoreConfig": "$.next.step.restore_config.endpoint_config_name"}


def path_allowed(every: dict[str, Any], order: list[str]) -> None:
    """Each state of ``order`` can follow the one before (the poll loop's Continue routes by ``then``)."""
    for here, there in pairwise(order):
        assert there in next_states(every[here]), (here, there, next_states(every[here]))


def test_a_step_asks_its_approval_then_sizes_its_instances_then_moves_users() -> None:
    every = states("canary_rollout.asl.json")
    # A canary step that needs a person: asked before anything of the step changes; the canary sized to the
    # step's weight (kill switch and lease checked first) and serving before the weights move; bake and analysis
    # after.
    canary_step = [
        "LoadStep",
        "NeedsApproval?",
        "RequestApproval",
        "VerifyApproval",
        "Promotion?",
        "GuardSize",
        "ReadKillSwitch",
        "KillSwitch?",
        "CheckLease",
        "GuardThen",
        "SizeCanary",
        "StartCapacityPoll",
        "CapacityReady?",
        "NextCapacityPoll",
        "CapacityWait",
        "EnsureCapacity",
        "CapacityReady?",
        "GuardWeights",
        "ReadKillSwitch",
        "KillSwitch?",
        "CheckLease",
        "GuardThen",
        "SetWeights",
        "PollAfterWeights",
        "DescribeEndpoint",
        "InService?",
        "Continue",
        "MarkBakeStart",
        "Bake",
        "Analyse",
        "Verdict",
        "Advance",
        "LoadStep",
    ]
    path_allowed(every, canary_step)
    # The 100 % step: asked before the primary grows and takes the new model; the canary's target goes first.
    promotion = [
        "LoadStep",
        "NeedsApproval?",
        "RequestApproval",
        "VerifyApproval",
        "Promotion?",
        "GuardGrow",
        "ReadKillSwitch",
        "KillSwitch?",
        "CheckLease",
        "GuardThen",
        "GrowPrimary",
        "StartCapacityPoll",
        "CapacityReady?",
        "GuardPromote",
        "CreateFinalConfig",
        "ReadKillSwitch",
        "KillSwitch?",
        "CheckLease",
        "GuardThen",
        "ReleaseCanaryTarget",
        "Promote",
    ]
    path_allowed(every, promotion)
    # And only so: nothing else leads to a weight change, a promotion or an approval.
    into = {name: {n for n, s in every.items() if name in next_states(s)} for name in every}
    assert into["SetWeights"] == {"GuardThen"} and into["GuardWeights"] == {"CapacityReady?"}
    assert into["RequestApproval"] == {"NeedsApproval?"} and into["NeedsApproval?"] == {"LoadStep"}
    # Instances change under the same guard as weights: the kill switch, then the lease's fencing token.
    assert into["SizeCanary"] == {"GuardThen"} and into["GrowPrimary"] == {"GuardThen"}
    assert into["GuardSize"] == {"Promotion?"} and into["GuardGrow"] == {"Promotion?"}
    assert into["GuardPromote"] == {"CapacityReady?"} and into["Promote"] == {"ReleaseCanaryTarget"}
    assert into["Promotion?"] == {"NeedsApproval?", "VerifyApproval"}
    assert {c["Next"] for c in every["Verdict"]["Choices"]} == {"Advance", "CanExtend?"}
    # Users move to the canary only once its instances serve; the primary takes the new model once it is grown.
    ready = every["CapacityReady?"]["Choices"]
    assert (
        ready[0]["Next"] == "GuardWeights"
        and {"Variable": "$.capacity.ready", "BooleanEquals": True} in ready[0]["And"]
    )
    assert {"Variable": "$.capacity.variant", "StringEqualsPath": "$.plan.canary_variant_name"} in ready[0]["And"]
    assert ready[1] == {"Variable": "$.capacity.ready", "BooleanEquals": True, "Next": "GuardPromote"}
    assert ends_of_catch(every, "CapacityTimeout") == {"Rollback"}
    sized = every["SizeCanary"]["Parameters"]["Payload"]
    assert (sized["action"], sized["weight.$"], sized["max_canary.$"]) == (
        "size_canary",
        "$.cursor.step.weight",
        "$.plan.capacity.max_canary",
    )


def test_no_failure_after_the_promotion_rolls_the_release_back() -> None:
    every = states("canary_rollout.asl.json")
    for state_name in AFTER_THE_PROMOTION:
        for catch in every[state_name]["Catch"]:
            assert "Rollback" not in ends_of_catch(every, catch["Next"]), state_name


def test_the_pre_traffic_gates_and_the_shadow_phase_stand_before_the_first_weight_change() -> None:
    every = states("canary_rollout.asl.json")
    gates_on = {"Variable": "$.plan.pre_traffic_gates", "BooleanEquals": True}
    # The artifact gate: after Validate, before a dry run's audit or the lease; a refusal changes nothing.
    assert every["Validate"]["Next"] == "ArtifactGate?"
    assert every["ArtifactGate?"]["Choices"] == [gates_on | {"Next": "CheckArtifact"}]
    # Both models deploy the copy the gate pinned (verified/sha256/...), never the key the request named.
    assert every["CheckArtifact"]["Next"] == "PinArtifact"
    assert every["PinArtifact"]["Next"] == "PinFinalArtifact" and every["PinFinalArtifact"]["Next"] == "DryRun?"
    pins = {every[name]["ResultPath"]: every[name]["InputPath"] for name in ("PinArtifact", "PinFinalArtifact")}
    assert pins == {
        f"$.plan.{model}.PrimaryContainer.ModelDataUrl": "$.artifact_gate.result.pinned_url"
        for model in ("create_model", "create_final_model")
    }
    assert every["CheckArtifact"]["ResultPath"] == "$.artifact_gate"
    assert [c["Next"] for c in every["CheckArtifact"]["Catch"]] == ["Refused"]
    # The candidate gate, then the shadow phase: the canary is InService at weight 0; the first step starts
    # only on their pass (or where they are off).
    into_first_step = {name for name, state in every.items() if "FirstStep" in next_states(state)}
    assert into_first_step == {"Continue", "Shadow?", "ShadowVerdict"}
    assert {c["StringEquals"]: c["Next"] for c in every["Continue"]["Choices"]}["steps"] == "CandidateGate?"
    assert every["CandidateGate?"]["Choices"] == [gates_on | {"Next": "TestCandidate"}]
    assert every["CandidateGate?"]["Default"] == "Shadow?"
    assert every["CandidateVerdict"]["Choices"] == [
        {"Variable": "$.candidate_gate.passed", "BooleanEquals": True, "Next": "Shadow?"}
    ]
    assert every["Shadow?"]["Choices"] == [{"Variable": "$.plan.shadow", "IsNull": False, "Next": "StartCapture"}]
    assert every["ShadowVerdict"]["Choices"] == [
        {"Variable": "$.shadow_comparison.passed", "BooleanEquals": True, "Next": "FirstStep"}
    ]
    for verdict in ("CandidateVerdict", "ShadowVerdict"):
        assert ends_of_catch(every, every[verdict]["Default"]) == {"Rollback"}


def test_capture_is_on_only_from_after_the_candidate_gate_for_the_shadow_seconds_and_off_before_the_comparison() -> (
    None
):
    every = states("canary_rollout.asl.json")
    # Only the shadow config captures (the plan's shadow_config carries the data capture, see
    # tests/unit/promotion/test_shadow_capture.py); the canary config users' traffic runs on otherwise does not.
    built = {
        name: state["Parameters"]["Payload.$"]
        for name, state in every.items()
        if state.get("Parameters", {}).get("FunctionName") == "${EndpointConfigFunctionArn}"
    }
    assert built == {
        "CreateCanaryConfig": "$.plan.canary_config",
        "CreateShadowConfig": "$.plan.shadow_config",
        "CreateFinalConfig": "$.plan.final_config",
    }
    assert not [name for name, state in every.items() if state.get("Resource", "").endswith("createEndpointConfig")]
    assert every["DeployCanary"]["Parameters"]["EndpointConfigName.$"] == "$.plan.canary_endpoint_config_name"
    # The endpoint goes onto the shadow config in one place, reached only from Shadow? (after the candidate gate,
    # so its prompts are never captured) ...
    to_shadow = {
        name
        for name, state in every.items()
        if state.get("Parameters", {}).get("EndpointConfigName.$") == "$.plan.shadow_endpoint_config_name"
        and state["Resource"].endswith("updateEndpoint")
    }
    assert to_shadow == {"StartCapture"}
    assert {name for name, state in every.items() if "StartCapture" in next_states(state)} == {"Shadow?"}
    # ... bakes shadow.seconds once InService there, then goes back to the canary config (capture off) ...
    continues = {c["StringEquals"]: c["Next"] for c in every["Continue"]["Choices"]}
    assert every["PollAfterStartCapture"]["Parameters"]["then"] == "shadow-bake" and continues["shadow-bake"] == (
        "ShadowBake"
    )
    assert every["ShadowBake"]["SecondsPath"] == "$.plan.shadow.seconds" and every["ShadowBake"]["Next"] == "EndCapture"
    end = every["EndCapture"]["Parameters"]
    assert end["EndpointConfigName.$"] == "$.plan.canary_endpoint_config_name" and end["RetainAllVariantProperties"]
    # ... and compares only once the endpoint is InService without capture.
    assert every["PollAfterEndCapture"]["Parameters"] == {
        "attempt": 0,
        "then": "shadow-compare",
        "expect.$": "$.plan.canary_endpoint_config_name",
    }
    assert continues["shadow-compare"] == "CompareShadow"
    assert {name for name, state in every.items() if "CompareShadow" in next_states(state)} == {"Continue"}
    assert [c["Next"] for c in every["StartCapture"]["Catch"] + every["EndCapture"]["Catch"]] == ["Rollback"] * 2


def test_approval_waits_for_the_task_token_with_a_heartbeat_and_a_timeout() -> None:
    approval = states("canary_rollout.asl.json")["RequestApproval"]
    assert approval["Resource"].endswith("lambda:invoke.waitForTaskToken")
    assert approval["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
    assert "TimeoutSecondsPath" in approval and "HeartbeatSecondsPath" in approval


def test_the_registry_write_never_overwrites_a_release_with_another_base_checksum() -> None:
    registry = "${ModelRegistryTableName}"
    [write] = [s for _, s in tasks("canary_rollout.asl.json") if s["Parameters"].get("TableName") == registry]
    parameters = write["Parameters"]
    assert set(parameters["ExpressionAttributeNames"].values()) == {REGISTRY_PK, REGISTRY_SHA256}
    assert parameters["ConditionExpression"] == "attribute_not_exists(#pk) OR attribute_not_exists(#sha) OR #sha = :sha"
    assert parameters["ExpressionAttributeValues"][":sha"] == {"S.$": f"$.plan.registry_item.{REGISTRY_SHA256}.S"}
