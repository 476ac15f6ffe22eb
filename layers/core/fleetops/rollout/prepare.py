"""Turn a rollout request into a plan: validate, check the kill switch, read the endpoint and pointer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetops.rollout.plan import EndpointSnapshot, Pointer, RolloutPlan, build_plan, parse_request


class KillSwitchEngagedError(RuntimeError):
    """The kill switch is engaged: no rollout starts until an operator releases it."""


@dataclass(frozen=True)
class PrepareDeps:
    read_endpoint: Callable[[str], EndpointSnapshot]
    read_pointer: Callable[[str], Pointer | None]
    kill_switch_engaged: Callable[[], bool]
    pointer_prefix: str
    dry_run: bool = False  # the stack's DRY_RUN: every rollout only plans


def prepare_rollout(request: dict[str, Any], now: datetime, deps: PrepareDeps) -> RolloutPlan:
    """Validate the request and plan the rollout against the endpoint as it is now. Changes nothing.

    Raises
    ------
    RolloutInputError
        The request is invalid (every problem listed).
    KillSwitchEngagedError
        Automation is switched off.
    EndpointMissingError, EndpointNotReadyForRolloutError
        The endpoint does not exist, is not InService, or already has the canary variant.
    """
    parsed = parse_request(request)
    if deps.kill_switch_engaged():
        raise KillSwitchEngagedError("the automation kill switch is engaged; release it to start a rollout")
    endpoint = deps.read_endpoint(parsed.endpoint_name)
    parameter = f"{deps.pointer_prefix.rstrip('/')}/{parsed.endpoint_name}"
    return build_plan(parsed, endpoint, now, parameter, deps.read_pointer(parameter), dry_run=deps.dry_run)
