"""Rollback as a reconcile loop: look at the endpoint, do the next safe thing, look again.

Each call returns one action. Running the rollback again on an endpoint that is already back on
its target config returns ``finish`` straight away, so rolling back twice is safe. The target comes back as a copy
with the instances serving now (:mod:`fleetops.rollout.restore_config`), which counts as the target from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetops.endpoint import EndpointSnapshot
from fleetops.rollout.config_copy import ConfigPlan
from fleetops.rollout.in_service import InServiceSettings
from fleetops.rollout.lease_holders import ROLLBACK_LEASE_PREFIX, ROLLOUT_LEASE_PREFIX
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.restore_config import restore_plan, restores

if TYPE_CHECKING:
    from fleetops.endpoint import LeaseInfo

Action = Literal["wait", "zero_canary", "restore_config", "finish", "join"]

#: Request keys that would let the caller choose where an endpoint goes or whose lease to use. The target is
#: derived (the rollout's lease row, else the model pointer), and the holder is proven by the lease row.
DERIVED_KEYS = ("target_endpoint_config_name", "restore_pointer_json", "lease_holder")


class RollbackInputError(ValueError):
    """The rollback request is invalid, names something that is derived, or there is no config to return to."""


class EndpointNotSettledError(RuntimeError):
    """The endpoint stayed in a transitional state for the whole polling budget."""


class RollbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    endpoint_name: str = Field(min_length=1, max_length=63)
    rollback_id: str = Field(min_length=1, max_length=80)
    canary_variant_name: str | None = None
    abort_only: bool = Field(
        default=False,
        description="only abort a rollout still in flight, never undo a promotion (the alarm responder's mode)",
    )
    reason: str = "operator request"
    requested_by: str = "operator"
    in_service: InServiceSettings = InServiceSettings()
    attempt: int = Field(default=0, ge=0)
    # Step Functions links a child execution to its parent through this input key. It proves nothing alone:
    # the rollback acts as the rollout only when the lease row names this very execution (rollout_holder).
    started_by: str | None = Field(default=None, alias="AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID")


def parse_request(raw: dict[str, Any]) -> RollbackRequest:
    """The rollback request, or one :class:`RollbackInputError` that lists every problem (nothing changed yet).

    Examples
    --------
    >>> parse_request({"endpoint_name": "e", "rollback_id": "r", "lease_holder": "x"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fleetops.rollout.rollback.RollbackInputError: a rollback request may not name lease_holder: ...
    """
    named = [key for key in DERIVED_KEYS if key in raw]
    if named:
        raise RollbackInputError(
            f"a rollback request may not name {', '.join(named)}: the config to return to, the pointer to restore "
            "and the lease holder are derived (the rollout's lease row, else the model pointer's previous config); "
            f"remove {'it' if len(named) == 1 else 'them'} and start again. Nothing was changed."
        )
    try:
        return RollbackRequest.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise RollbackInputError(f"invalid rollback request: {problems}. Nothing was changed.") from None


def check_managed(endpoint_name: str, managed: Collection[str], environment: str | None) -> None:
    """Refuse an endpoint that fleet.yaml does not list for this stack's environment.

    Examples
    --------
    >>> check_managed("manga-chat-prod", {"manga-chat-dev"}, "dev")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fleetops.rollout.rollback.RollbackInputError: endpoint 'manga-chat-prod' is not managed by this stack ...
    """
    if endpoint_name not in managed:
        scope = f"for environment {environment!r} " if environment else ""
        raise RollbackInputError(
            f"endpoint {endpoint_name!r} is not managed by this stack (fleet.yaml {scope}lists {sorted(managed)}); "
            "nothing was changed"
        )


def resolve_canary(request: RollbackRequest, roles: Mapping[str, str]) -> RollbackRequest:
    """The request with the canary variant whose traffic goes to 0: never a primary, derived when not named.

    ``roles``: the endpoint's variants in fleet.yaml (name -> ``primary``/``canary``). Naming a primary would set
    its weight to 0 and send all traffic to the canary while the config is restored, so it is refused; with no
    name, fleet.yaml's one canary variant of the endpoint is the one.

    Examples
    --------
    >>> roles = {"primary": "primary", "canary": "canary"}
    >>> resolve_canary(RollbackRequest(endpoint_name="e", rollback_id="r"), roles).canary_variant_name
    'canary'
    >>> resolve_canary(RollbackRequest(endpoint_name="e", rollback_id="r", canary_variant_name="primary"), roles)
    Traceback (most recent call last):
    ...
    fleetops.rollout.rollback.RollbackInputError: canary_variant_name 'primary' is a primary variant of 'e' \
(fleet.yaml role: primary): a rollback takes traffic off a canary only, never off the primary; name the canary \
(['canary']) or leave it out. Nothing was changed.
    """
    canaries = sorted(name for name, role in roles.items() if role == "canary")
    named = request.canary_variant_name
    if named is not None and roles.get(named) == "primary":
        raise RollbackInputError(
            f"canary_variant_name {named!r} is a primary variant of {request.endpoint_name!r} (fleet.yaml role: "
            f"primary): a rollback takes traffic off a canary only, never off the primary; name the canary "
            f"({canaries}) or leave it out. Nothing was changed."
        )
    if named is None and len(canaries) == 1:
        return request.model_copy(update={"canary_variant_name": canaries[0]})
    return request


def rollout_holder(request: RollbackRequest, lease: LeaseInfo | None) -> str | None:
    """The rollout's holder when this rollback is that rollout's own (the lease row names its execution).

    Examples
    --------
    >>> from fleetops.endpoint import LeaseInfo
    >>> lease = LeaseInfo("e", "canary_rollout/v7", 2_000_000_000, execution_arn="arn:exec:v7")
    >>> own = {"endpoint_name": "e", "rollback_id": "v7-rollback"}
    >>> rollout_holder(RollbackRequest(**own, AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID="arn:exec:v7"), lease)
    'canary_rollout/v7'
    >>> rollout_holder(RollbackRequest(**own, AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID="arn:exec:other"), lease)
    """
    if (
        request.started_by
        and lease is not None
        and lease.execution_arn == request.started_by
        and lease.holder.startswith(ROLLOUT_LEASE_PREFIX)
    ):
        return lease.holder
    return None


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
    lease_execution_arn: str = Field(description="the execution the lease row names: the rollout's or this one's")
    takeover_execution_arn: str = Field(description="the execution of the lease row it may take; else its own")
    stop_execution_arn: str | None = Field(default=None, description="the rollout execution this rollback aborts")
    zero_weights: tuple[dict[str, Any], ...] = ()
    wait_seconds: int = 0
    attempt: int
    pointer_json: str | None
    lease_restore_pointer: str = Field(default="", description="pointer_json as the lease row stores it")
    restore_config: ConfigPlan | None = Field(
        default=None, description="restore_config: the copy of the target that goes onto the endpoint (live counts)"
    )
    note: str


def resolve_target(request: RollbackRequest, pointer: Pointer | None, current_config: str) -> tuple[str, str | None]:
    """The config to return to and the pointer value to restore, from the model pointer alone.

    Used when no lease row says where to go (see :func:`plan_rollback`); the first pass's answer is then
    kept in the rollback's lease row, so it cannot change once the endpoint has moved. An endpoint on
    neither the pointer's config nor its previous one is a rollout still in flight: back to the pointer's
    config, pointer untouched. Otherwise the last promotion is undone (pointer restored at the end), unless
    ``abort_only`` asks to touch nothing: the alarm responder may fire again after a rollback and must
    never walk the fleet back a version.
    """
    previous = pointer.previous_endpoint_config_name if pointer else None
    known = [name for name in (pointer.endpoint_config_name, previous) if name] if pointer else []
    if pointer is not None and not any(restores(request.endpoint_name, current_config, name) for name in known):
        return pointer.endpoint_config_name, None  # a rollout in flight: abort it
    if request.abort_only:
        return current_config, None  # nothing in flight: next_step finishes at once
    restored = pointer.restored() if pointer else None
    if restored is None:
        raise RollbackInputError(
            f"no rollout of {request.endpoint_name!r} is in flight and its model pointer names no previous config: "
            "there is nothing to roll back to; nothing was changed"
        )
    # Undo the last promotion (the previous base and adapter versions, checksums included), or, once the
    # endpoint is back on the previous config, finish restoring the pointer.
    return restored.endpoint_config_name, restored.to_json()


def rollout_to_abort(holder: str, lease: LeaseInfo | None, now: datetime) -> LeaseInfo | None:
    """The live lease of a rollout in flight that this rollback (writing as ``holder``) takes over, or ``None``.

    A rollout holds the endpoint's lease for its whole life, approvals included. A rollback started by the
    alarm responder or an operator aborts it: it takes the lease and stops the rollout's execution, instead of
    deferring while a broken canary keeps serving. The rollout's own rollback already holds the lease.

    Examples
    --------
    >>> from fleetops.endpoint import LeaseInfo
    >>> lease = LeaseInfo("e", "canary_rollout/v7", 2_000_000_000, execution_arn="arn:exec", return_config="v6-config")
    >>> rollout_to_abort("rollback/r", lease, datetime.now()).holder
    'canary_rollout/v7'
    >>> rollout_to_abort("canary_rollout/v7", lease, datetime.now()) is None
    True
    """
    if lease is None or lease.expires_at < int(now.timestamp()) or lease.holder == holder:
        return None
    return lease if lease.holder.startswith(ROLLOUT_LEASE_PREFIX) else None


def rollback_in_progress(holder: str, lease: LeaseInfo | None, now: datetime) -> LeaseInfo | None:
    """The live lease of another rollback of this endpoint, which this one joins instead of competing with.

    Joined only while that rollback still runs (:func:`dead_rollback`, checked by :func:`plan_rollback`).

    Examples
    --------
    >>> from fleetops.endpoint import LeaseInfo
    >>> lease = LeaseInfo("e", "rollback/breaker-trips-e-1", 2_000_000_000)
    >>> rollback_in_progress("rollback/engine-restarts-e-2", lease, datetime.now()).holder
    'rollback/breaker-trips-e-1'
    >>> rollback_in_progress("rollback/breaker-trips-e-1", lease, datetime.now()) is None
    True
    """
    if lease is None or lease.expires_at < int(now.timestamp()):
        return None
    return lease if lease.holder.startswith(ROLLBACK_LEASE_PREFIX) and lease.holder != holder else None


def dead_rollback(lease: LeaseInfo, execution_status: Callable[[str], str] | None) -> str | None:
    """How the rollback that holds ``lease`` ended (``FAILED``, ``ABORTED``, ...), or ``None`` while it runs.

    ``execution_status``: DescribeExecution's ``status``. A rollback that ended without giving its lease back
    would otherwise be joined for the lease's lifetime while the canary it meant to stop keeps serving. A row
    that names no execution (or no way to ask) counts as running: it is never taken from its holder.

    Examples
    --------
    >>> from fleetops.endpoint import LeaseInfo
    >>> lease = LeaseInfo("e", "rollback/oom-1", 2_000_000_000, execution_arn="arn:exec:oom-1")
    >>> dead_rollback(lease, lambda arn: "FAILED")
    'FAILED'
    >>> dead_rollback(lease, lambda arn: "RUNNING") is None
    True
    """
    if not lease.execution_arn or execution_status is None:
        return None
    status = execution_status(lease.execution_arn)
    return None if status == "RUNNING" else status


def next_step(
    request: RollbackRequest,
    endpoint: EndpointSnapshot,
    target: str,
    pointer_json: str | None,
    now: datetime,
    pointer_parameter: str = "",
    abort: LeaseInfo | None = None,
    joins: LeaseInfo | None = None,
    holder: str | None = None,
    execution_arn: str = "",
    takes_over: LeaseInfo | None = None,
) -> RollbackStep:
    """Decide the next rollback action from the endpoint as it is now.

    ``joins``: another rollback's live lease. A broken canary trips several alarms at once and each starts a
    rollback; the first does the work and the others ``join`` it, ending at once without touching anything.
    ``holder`` and ``execution_arn``: whom the lease row names (default: this rollback's own holder).
    ``takes_over``: the lease of a rollback that ended without giving it back, which this one takes.

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
    holder = holder or f"{ROLLBACK_LEASE_PREFIX}{request.rollback_id}"
    taken = abort or takes_over
    common: dict[str, Any] = {
        "rollback_id": request.rollback_id,
        "reason": request.reason,
        "requested_by": request.requested_by,
        "lease_holder": holder,
        "takeover_holder": taken.holder if taken else holder,
        "stop_execution_arn": abort.execution_arn if abort else None,
        "lease_execution_arn": execution_arn,
        "takeover_execution_arn": (taken.execution_arn or "") if taken else execution_arn,
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
    if restores(endpoint.endpoint_name, endpoint.endpoint_config_name, target):
        serving = "" if endpoint.endpoint_config_name == target else f" as {endpoint.endpoint_config_name}"
        return RollbackStep(action="finish", note=f"endpoint serves {target}{serving}", **common)
    canary = next((v for v in endpoint.variants if v.variant_name == request.canary_variant_name), None)
    others = [v for v in endpoint.variants if v.variant_name != request.canary_variant_name]
    if canary is not None and canary.weight > 0 and others:
        # Traffic off the canary first: a weight change takes effect far sooner than a config change.
        # At 100 % the old variants sit at weight 0: give them the traffic back evenly.
        share = sum(v.weight for v in others)
        weights = [{"VariantName": v.variant_name, "DesiredWeight": v.weight if share else 1.0} for v in others]
        weights.append({"VariantName": canary.variant_name, "DesiredWeight": 0.0})
        return RollbackStep(action="zero_canary", zero_weights=tuple(weights), note="canary weight to 0", **common)
    # Never the target as it was created: its instance counts are that day's, and an endpoint scaled out since
    # (an incident, say) would lose the extra instances now. A copy with the live counts goes on instead.
    restored = restore_plan(endpoint.endpoint_name, target, now)
    note = f"endpoint config back to {target} as {restored.endpoint_config_name} (the instances serving now)"
    return RollbackStep(action="restore_config", restore_config=restored, note=note, **common)


def plan_rollback(
    request: RollbackRequest,
    now: datetime,
    read_endpoint: Callable[[str], EndpointSnapshot],
    read_pointer: Callable[[str], Pointer | None],
    pointer_prefix: str,
    read_lease: Callable[[str], LeaseInfo | None] | None = None,
    execution_id: str = "",
    execution_status: Callable[[str], str] | None = None,
) -> RollbackStep:
    """Read the endpoint, the pointer and the lease; derive the target config and return the next action.

    Where to go never comes from the request. The lease row decides: the rollout's own rollback (the row names
    the execution that started it) and a rollback that takes over a rollout's lease return to the config the
    rollout started from; a rollback's later passes read back what its first pass wrote into its own row, so
    the target cannot move while the endpoint does. Only without such a row does the model pointer decide
    (:func:`resolve_target`). ``execution_id``: this rollback's execution, recorded in a row it takes.
    ``execution_status``: DescribeExecution's status of an execution; another rollback's row is joined only while
    its execution runs, and taken over (with the target its first pass chose) once it has ended.
    """
    parameter = f"{pointer_prefix.rstrip('/')}/{request.endpoint_name}"
    endpoint = read_endpoint(request.endpoint_name)
    lease = read_lease(request.endpoint_name) if read_lease else None
    for_rollout = rollout_holder(request, lease)
    holder = for_rollout or f"{ROLLBACK_LEASE_PREFIX}{request.rollback_id}"
    execution_arn = request.started_by if for_rollout and request.started_by else execution_id

    def step(target: str, pointer_json: str | None, **found: LeaseInfo | None) -> RollbackStep:
        return next_step(request, endpoint, target, pointer_json, now, parameter, holder=holder,
                         execution_arn=execution_arn, **found)  # fmt: skip

    other = rollback_in_progress(holder, lease, now)
    ended = dead_rollback(other, execution_status) if other is not None else None
    if other is not None and ended is None:
        return step(endpoint.endpoint_config_name, None, joins=other)
    dead = other if ended else None  # its execution has ended: take its lease over instead of joining it
    abort = rollout_to_abort(holder, lease, now)
    if lease is not None and lease.return_config and lease.holder == holder:
        target, pointer_json = lease.return_config, lease.restore_pointer
    elif abort is not None and abort.return_config:
        target, pointer_json = abort.return_config, None  # back where the rollout started, the pointer untouched
    elif dead is not None and dead.return_config:
        target, pointer_json = dead.return_config, dead.restore_pointer  # finish what the dead rollback chose
    else:
        target, pointer_json = resolve_target(request, read_pointer(parameter), endpoint.endpoint_config_name)
    chosen = step(target, pointer_json, abort=abort, takes_over=dead)
    if dead is None:
        return chosen
    note = f"{chosen.note}; takes over {dead.holder}'s lease (its execution {ended})"
    return chosen.model_copy(update={"note": note})
