"""Rollback as a reconcile loop: look at the endpoint, do the next safe thing, look again.

Each call returns one action. Running the rollback again on an endpoint that is already back on
its target config returns ``finish`` straight away, so rolling back twice is safe.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fleetops.endpoint import EndpointSnapshot
from fleetops.rollout.plan import ROLLOUT_LEASE_PREFIX, InServiceSettings, Pointer

if TYPE_CHECKING:
    from fleetops.endpoint import LeaseInfo

Action = Literal["wait", "zero_canary", "restore_config", "finish", "join"]
ROLLBACK_LEASE_PREFIX = "rollback/"


class RollbackInputError(ValueError):
    """The rollback request is invalid or names no config to return to."""


class EndpointNotSettledError(RuntimeError):
    """The endpoint stayed in a transitional state for the whole polling budget."""


class RollbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    endpoint_name: str = Field(min_length=1, max_length=63)
    rollback_id: str = Field(min_length=1, max_length=80)
    target_endpoint_config_name: str | None = Field(default=None, description="default: the pointer's previous config")
    canary_variant_name: str | None = None
    restore_pointer_json: str | None = Field(default=None, description="pointer value to put back")
    abort_only: bool = Field(
        default=False,
        description="only abort a rollout still in flight, never undo a promotion (the alarm responder's mode)",
    )
    reason: str = "operator request"
    requested_by: str = "operator"
    lease_holder: str | None = Field(default=None, description="the rollout's holder when it calls us")
    in_service: InServiceSettings = InServiceSettings()
    attempt: int = Field(default=0, ge=0)
    # Step Functions links a child execution to its parent through this input key.
    started_by: str | None = Field(default=None, alias="AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID")

    @property
    def holder(self) -> str:
        """The lease holder this rollback writes as: the rollout's when it calls us, else its own."""
        return self.lease_holder or f"{ROLLBACK_LEASE_PREFIX}{self.rollback_id}"


class RollbackStep(BaseModel):
    """The next action and everything the state machine needs to perform it."""

    model_config = ConfigDict(frozen=True)

    action: Action
    rollback_id: str
    reason: str
    requested_by: str
    lease_holder: str
    now_epoch: int
    lease_expires_at: int
    pointer_parameter: str
    endpoint_name: str
    status: str
    current_endpoint_config_name: str
    target_endpoint_config_name: str
    canary_variant_name: str | None
    takeover_holder: str = Field(description="a holder whose lease this rollback may take; else its own")
    stop_execution_arn: str | None = Field(default=None, description="the rollout execution this rollback aborts")
    zero_weights: tuple[dict[str, Any], ...] = ()
    wait_seconds: int = 0
    attempt: int
    pointer_json: str | None
    lease_restore_pointer: str = Field(default="", description="pointer_json as the lease row stores it")
    note: str


def resolve_target(request: RollbackRequest, pointer: Pointer | None, current_config: str) -> tuple[str, str | None]:
    """The config to return to and the pointer value to restore.

    Called on every pass of the rollback loop, so the answer must not change once the endpoint has
    moved. An explicit target wins. An endpoint on neither the pointer's config nor its previous one
    is a rollout still in flight: back to the pointer's config, pointer untouched. Otherwise the last
    promotion is undone (pointer restored at the end), unless ``abort_only`` asks to touch nothing:
    the alarm responder may fire again after a rollback and must never walk the fleet back a version.
    """
    if request.target_endpoint_config_name:
        return request.target_endpoint_config_name, request.restore_pointer_json
    previous = pointer.previous_endpoint_config_name if pointer else None
    if pointer is not None and current_config not in (pointer.endpoint_config_name, previous):
        return pointer.endpoint_config_name, None  # a rollout in flight: abort it
    if request.abort_only:
        return current_config, None  # nothing in flight: next_step finishes at once
    if pointer is None or not previous:
        raise RollbackInputError(
            f"no target_endpoint_config_name given and the model pointer of {request.endpoint_name!r} "
            "names no previous config"
        )
    restored = Pointer(
        model=pointer.model,
        version=pointer.previous_version or "unknown",
        sagemaker_model="unknown",
        endpoint_config_name=previous,
    )
    # Undo the last promotion, or, once the endpoint is back on the previous config, finish restoring it.
    return previous, request.restore_pointer_json or restored.to_json()


def rollout_to_abort(request: RollbackRequest, lease: LeaseInfo | None, now: datetime) -> LeaseInfo | None:
    """The lease of a rollout in flight that this rollback takes over, or ``None``.

    A rollout holds the endpoint's lease for its whole life, approvals included. A rollback started by the
    alarm responder or an operator aborts it: it takes the lease and stops the rollout's execution, instead of
    deferring while a broken canary keeps serving. The rollout's own rollback already holds the lease.

    Examples
    --------
    >>> from fleetops.endpoint import LeaseInfo
    >>> lease = LeaseInfo("e", "canary_rollout/v7", 2_000_000_000, execution_arn="arn:exec", return_config="v6-config")
    >>> rollout_to_abort(RollbackRequest(endpoint_name="e", rollback_id="r"), lease, datetime.now()).holder
    'canary_rollout/v7'
    >>> rollout_to_abort(RollbackRequest(endpoint_name="e", rollback_id="r", lease_holder="canary_rollout/v7"),
    ...                  lease, datetime.now()) is None
    True
    """
    if request.lease_holder or lease is None or lease.expires_at < int(now.timestamp()):
        return None
    return lease if lease.holder.startswith(ROLLOUT_LEASE_PREFIX) else None


def rollback_in_progress(request: RollbackRequest, lease: LeaseInfo | None, now: datetime) -> LeaseInfo | None:
    """The live lease of another rollback of this endpoint, which this one joins instead of competing with.

    Examples
    --------
    >>> from fleetops.endpoint import LeaseInfo
    >>> lease = LeaseInfo("e", "rollback/breaker-trips-e-1", 2_000_000_000)
    >>> rollback_in_progress(RollbackRequest(endpoint_name="e", rollback_id="engine-restarts-e-2"), lease,
    ...                      datetime.now()).holder
    'rollback/breaker-trips-e-1'
    >>> rollback_in_progress(RollbackRequest(endpoint_name="e", rollback_id="breaker-trips-e-1"), lease,
    ...                      datetime.now()) is None
    True
    """
    if request.lease_holder or lease is None or lease.expires_at < int(now.timestamp()):
        return None
    return lease if lease.holder.startswith(ROLLBACK_LEASE_PREFIX) and lease.holder != request.holder else None


def next_step(
    request: RollbackRequest,
    endpoint: EndpointSnapshot,
    target: str,
    pointer_json: str | None,
    now: datetime,
    pointer_parameter: str = "",
    abort: LeaseInfo | None = None,
    joins: LeaseInfo | None = None,
) -> RollbackStep:
    """Decide the next rollback action from the endpoint as it is now.

    ``joins``: another rollback's live lease. A broken canary trips several alarms at once and each starts a
    rollback; the first does the work and the others ``join`` it, ending at once without touching anything.

    Examples
    --------
    A settled endpoint already on the target config needs nothing more:

    >>> from fleetops.endpoint import VariantSnapshot
    >>> v = VariantSnapshot(variant_name="primary", model_name="m", instance_type="ml.g5.2xlarge",
    ...                     instance_count=2, weight=1.0)
    >>> ep = EndpointSnapshot(endpoint_name="e", status="InService", endpoint_config_name="old", variants=(v,))
    >>> next_step(RollbackRequest(endpoint_name="e", rollback_id="r"), ep, "old", None, datetime.now()).action
    'finish'
    """
    now_epoch = int(now.timestamp())
    holder = request.holder
    common: dict[str, Any] = {
        "rollback_id": request.rollback_id,
        "reason": request.reason,
        "requested_by": request.requested_by,
        "lease_holder": holder,
        "takeover_holder": abort.holder if abort else holder,
        "stop_execution_arn": abort.execution_arn if abort else None,
        "now_epoch": now_epoch,
        # Long enough for the whole polling budget; renewed on every pass of the loop.
        "lease_expires_at": now_epoch + request.in_service.timeout_seconds + 3600,
        "pointer_parameter": pointer_parameter,
        "endpoint_name": endpoint.endpoint_name,
        "status": endpoint.status,
        "current_endpoint_config_name": endpoint.endpoint_config_name,
        "target_endpoint_config_name": target,
        "canary_variant_name": request.canary_variant_name,
        "attempt": request.attempt,
        "pointer_json": pointer_json,
        "lease_restore_pointer": pointer_json or "",
    }
    if joins is not None:
        return RollbackStep(action="join", note=f"{joins.holder} is already rolling back this endpoint", **common)
    if endpoint.status != "InService":
        waits = request.in_service.waits()
        if request.attempt >= len(waits):
            raise EndpointNotSettledError(
                f"endpoint {endpoint.endpoint_name!r} still {endpoint.status} after "
                f"{request.in_service.timeout_seconds} s; rollback stopped, nothing more changed"
            )
        return RollbackStep(
            action="wait", wait_seconds=waits[request.attempt], note=f"endpoint is {endpoint.status}", **common
        )
    if endpoint.endpoint_config_name == target:
        return RollbackStep(action="finish", note=f"endpoint serves {target}", **common)
    canary = next((v for v in endpoint.variants if v.variant_name == request.canary_variant_name), None)
    others = [v for v in endpoint.variants if v.variant_name != request.canary_variant_name]
    if canary is not None and canary.weight > 0 and others:
        # Traffic off the canary first: a weight change takes effect far sooner than a config change.
        # At 100 % the old variants sit at weight 0: give them the traffic back evenly.
        share = sum(v.weight for v in others)
        weights = [{"VariantName": v.variant_name, "DesiredWeight": v.weight if share else 1.0} for v in others]
        weights.append({"VariantName": canary.variant_name, "DesiredWeight": 0.0})
        return RollbackStep(action="zero_canary", zero_weights=tuple(weights), note="canary weight to 0", **common)
    return RollbackStep(action="restore_config", note=f"endpoint config back to {target}", **common)


def plan_rollback(
    request: RollbackRequest,
    now: datetime,
    read_endpoint: Callable[[str], EndpointSnapshot],
    read_pointer: Callable[[str], Pointer | None],
    pointer_prefix: str,
    read_lease: Callable[[str], LeaseInfo | None] | None = None,
) -> RollbackStep:
    """Read the endpoint, the pointer and the lease; resolve the target config and return the next action.

    The first pass decides where to go; the state machine writes that decision into its lease row, and every
    later pass reads it back, so the target cannot move while the endpoint does.
    """
    parameter = f"{pointer_prefix.rstrip('/')}/{request.endpoint_name}"
    endpoint = read_endpoint(request.endpoint_name)
    lease = read_lease(request.endpoint_name) if read_lease else None
    running = rollback_in_progress(request, lease, now)
    if running is not None:
        return next_step(request, endpoint, endpoint.endpoint_config_name, None, now, parameter, joins=running)
    abort = rollout_to_abort(request, lease, now)
    if (
        request.target_endpoint_config_name is None
        and lease is not None
        and lease.return_config
        and lease.holder == request.holder
    ):
        target, pointer_json = lease.return_config, lease.restore_pointer
    elif request.target_endpoint_config_name is None and abort is not None and abort.return_config:
        target, pointer_json = abort.return_config, None  # back where the rollout started, the pointer untouched
    else:
        target, pointer_json = resolve_target(request, read_pointer(parameter), endpoint.endpoint_config_name)
    return next_step(request, endpoint, target, pointer_json, now, parameter, abort)
