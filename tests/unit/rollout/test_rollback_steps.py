"""Rollback decisions: wait, canary weight to 0, previous config back, finish; targets from the lease row or pointer."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetops.endpoint import EndpointSnapshot, LeaseInfo, VariantSnapshot
from fleetops.rollout.in_service import InServiceSettings
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.rollback import (
    EndpointNotSettledError,
    RollbackInputError,
    RollbackRequest,
    RollbackStep,
    next_step,
    parse_request,
    plan_rollback,
    resolve_target,
)
from tests.conftest import load_event

NOW = datetime(2026, 11, 21, 9, 40, tzinfo=UTC)


def variant(name: str, weight: float) -> VariantSnapshot:
    return VariantSnapshot(
        variant_name=name, model_name=f"{name}-m", instance_type="ml.g5.2xlarge", instance_count=1, weight=weight
    )


def endpoint(config: str, *variants: VariantSnapshot, status: str = "InService") -> EndpointSnapshot:
    return EndpointSnapshot(endpoint_name="manga-chat", status=status, endpoint_config_name=config, variants=variants)


REQUEST = parse_request(load_event("rollback_plan")["request"])
OLD = "manga-chat-v6-config"
ROLLOUT_EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:canary-rollout:llama-q4-v7"
ROLLOUT_LEASE = LeaseInfo("manga-chat", "canary_rollout/llama-q4-v7", 2_000_000_000, ROLLOUT_EXECUTION, OLD)


def test_traffic_leaves_the_canary_first_then_the_previous_config_comes_back_then_finish() -> None:
    mid = endpoint("new", variant("primary", 75), variant("canary", 25))
    step = next_step(REQUEST, mid, OLD, None, NOW)
    assert step.action == "zero_canary"
    assert step.zero_weights == (
        {"VariantName": "primary", "DesiredWeight": 75},
        {"VariantName": "canary", "DesiredWeight": 0.0},
    )
    assert next_step(REQUEST, endpoint("new", variant("primary", 75), variant("canary", 0)), OLD, None, NOW).action == (
        "restore_config"
    )
    assert next_step(REQUEST, endpoint(OLD, variant("primary", 1)), OLD, None, NOW).action == "finish"


def test_at_100_percent_the_old_variants_get_the_traffic_back() -> None:
    step = next_step(REQUEST, endpoint("new", variant("primary", 0), variant("canary", 100)), OLD, None, NOW)
    assert step.zero_weights[0] == {"VariantName": "primary", "DesiredWeight": 1.0}


def test_an_updating_endpoint_is_waited_for_on_the_schedule_then_given_up_on() -> None:
    request = REQUEST.model_copy(
        update={"in_service": InServiceSettings(first_wait_seconds=2, max_wait_seconds=4, timeout_seconds=6)}
    )
    updating = endpoint("new", variant("primary", 1), status="Updating")
    waits = [
        next_step(request.model_copy(update={"attempt": n}), updating, OLD, None, NOW).wait_seconds for n in range(2)
    ]
    assert waits == [2, 4]
    with pytest.raises(EndpointNotSettledError, match="still Updating after 6 s"):
        next_step(request.model_copy(update={"attempt": 2}), updating, OLD, None, NOW)


def plan(request: RollbackRequest, lease: LeaseInfo | None, pointer: Pointer | None = None) -> RollbackStep:
    mid = endpoint("new", variant("primary", 75), variant("canary", 25))
    return plan_rollback(request, NOW, lambda _: mid, lambda _: pointer, "/p", lambda _: lease, "arn:exec:rollback")


def test_the_rollouts_own_rollback_writes_as_the_rollout_and_returns_where_its_lease_row_says() -> None:
    step = plan(REQUEST, ROLLOUT_LEASE)
    assert (step.lease_holder, step.lease_execution_arn) == ("canary_rollout/llama-q4-v7", ROLLOUT_EXECUTION)
    assert (step.target_endpoint_config_name, step.pointer_json, step.stop_execution_arn) == (OLD, None, None)


def test_a_rollback_started_by_another_execution_is_its_own_holder_and_aborts_the_rollout() -> None:
    forged = REQUEST.model_copy(update={"started_by": "arn:aws:states:::execution:canary-rollout:other"})
    step = plan(forged, ROLLOUT_LEASE)
    assert (step.lease_holder, step.lease_execution_arn) == ("rollback/llama-q4-v7-rollback", "arn:exec:rollback")
    assert (step.takeover_holder, step.stop_execution_arn) == ("canary_rollout/llama-q4-v7", ROLLOUT_EXECUTION)
    assert step.target_endpoint_config_name == OLD  # the rollout's return config, not anything the caller said


@pytest.mark.parametrize("key", ["target_endpoint_config_name", "restore_pointer_json", "lease_holder"])
def test_a_request_naming_what_is_derived_is_refused_with_what_to_do(key: str) -> None:
    with pytest.raises(RollbackInputError, match=rf"may not name {key}: .* derived .* remove it"):
        parse_request({"endpoint_name": "manga-chat", "rollback_id": "ops", key: "anything"})


def test_the_target_comes_from_the_pointer_without_a_lease_row() -> None:
    pointer = Pointer(model="manga-llama", version="v7", sagemaker_model="m7", endpoint_config_name="new",
                      previous_endpoint_config_name=OLD, previous_version="v6")  # fmt: skip
    bare = RollbackRequest(endpoint_name="manga-chat", rollback_id="ops")
    target, restored = resolve_target(bare, pointer, "new")
    assert target == OLD and restored is not None
    assert Pointer.model_validate_json(restored).version == "v6"
    with pytest.raises(RollbackInputError, match="names no previous config"):
        resolve_target(bare, None, "new")


def test_a_rollout_in_flight_goes_back_to_the_config_the_pointer_names() -> None:
    live = Pointer(model="manga-llama", version="v6", sagemaker_model="m6", endpoint_config_name=OLD)
    bare = RollbackRequest(endpoint_name="manga-chat", rollback_id="alarm-1", abort_only=True)
    assert resolve_target(bare, live, "v7-canary-config") == (OLD, None)  # pointer left as it is


def test_abort_only_never_undoes_a_promotion() -> None:
    promoted = Pointer(model="manga-llama", version="v7", sagemaker_model="m7", endpoint_config_name="new",
                       previous_endpoint_config_name=OLD, previous_version="v6")  # fmt: skip
    again = RollbackRequest(endpoint_name="manga-chat", rollback_id="alarm-2", abort_only=True)
    assert resolve_target(again, promoted, "new") == ("new", None)
    settled = endpoint("new", variant("primary", 1))
    assert next_step(again, settled, "new", None, NOW).action == "finish"


def test_another_rollback_is_joined_only_while_its_execution_runs() -> None:
    """The on-call's second alarm joins a rollback at work, but takes over from one that has ended: the dead one's
    lease would otherwise turn every rollback away while the canary keeps serving."""
    theirs = LeaseInfo("manga-chat", "rollback/oom-1", 2_000_000_000, "arn:exec:oom-1", OLD, "")
    mid = endpoint("new", variant("primary", 75), variant("canary", 25))

    def rollback_with(status: str) -> RollbackStep:
        return plan_rollback(REQUEST, NOW, lambda _: mid, lambda _: None, "/p", lambda _: theirs, "arn:exec:mine",
                             lambda arn: status if arn == "arn:exec:oom-1" else "MISSING")  # fmt: skip

    assert rollback_with("RUNNING").action == "join"
    taken = rollback_with("FAILED")
    assert taken.action == "zero_canary" and taken.target_endpoint_config_name == OLD
    assert (taken.takeover_holder, taken.takeover_execution_arn) == ("rollback/oom-1", "arn:exec:oom-1")
    assert taken.stop_execution_arn is None  # nothing to stop: it has ended
    assert "takes over rollback/oom-1's lease (its execution FAILED)" in taken.note


def test_the_config_comes_back_as_a_copy_with_the_live_counts_and_the_copy_counts_as_the_target() -> None:
    """Never the old config as it was created (its instance counts are that day's): a copy named after it, built
    from the target's variants, weights and fields with the instances serving now, never fewer than its own."""
    step = next_step(REQUEST, endpoint("new", variant("primary", 75), variant("canary", 0)), OLD, None, NOW)
    assert step.action == "restore_config" and step.restore_config is not None
    copy = step.restore_config
    assert copy.endpoint_config_name == "manga-chat-v6-config-restore-261121094000"
    assert (copy.source_config_name, copy.copy_variants, copy.copied_weights, copy.source_count_floor) == (
        OLD,
        True,
        "source",
        True,
    )
    assert step.target_endpoint_config_name == OLD  # what the lease row keeps: the copy is made again if retried
    on_copy = endpoint(copy.endpoint_config_name, variant("primary", 1))
    done = next_step(REQUEST, on_copy, OLD, None, NOW)
    assert done.action == "finish" and done.restore_config is None
    assert done.note == f"endpoint serves {OLD} as {copy.endpoint_config_name}"
    # Another release's copy is not the target.
    elsewhere = endpoint("manga-chat-v5-config-restore-261121094000", variant("primary", 1))
    assert next_step(REQUEST, elsewhere, OLD, None, NOW).action == "restore_config"


def test_a_retried_rollback_finds_its_target_restored_as_a_copy_and_finishes() -> None:
    """Its own lease row names the target; the endpoint already serves the copy an earlier pass made."""
    own = LeaseInfo("manga-chat", "rollback/llama-q4-v7-rollback", 2_000_000_000, "arn:exec:rollback", OLD, "")
    on_copy = endpoint(f"{OLD}-restore-261121093000", variant("primary", 1))
    step = plan_rollback(REQUEST, NOW, lambda _: on_copy, lambda _: None, "/p", lambda _: own, "arn:exec:rollback")
    assert (step.action, step.target_endpoint_config_name) == ("finish", OLD)


def test_an_endpoint_on_a_copy_of_the_pointers_config_is_no_rollout_in_flight() -> None:
    """After a rollback the pointer names the old config and the endpoint serves its copy: the responder's next
    canary alarm finds nothing to abort and changes nothing."""
    restored = Pointer(model="manga-llama", version="v6", sagemaker_model="unknown", endpoint_config_name=OLD)
    again = RollbackRequest(endpoint_name="manga-chat", rollback_id="alarm-3", abort_only=True)
    on_copy = f"{OLD}-restore-261121093000"
    assert resolve_target(again, restored, on_copy) == (on_copy, None)
    assert next_step(again, endpoint(on_copy, variant("primary", 1)), on_copy, None, NOW).action == "finish"
