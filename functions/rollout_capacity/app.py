"""Canary rollout, before each traffic change: the capacity the next step needs, and whether it serves yet.

Event (from the state machine), by ``action`` (:mod:`fleetops.rollout.step_sizing`):

- ``size_canary``: the canary sized to the step's weight from what serves users now; its scalable target held at
  that size (registered with the primary's target tracking on the first step). A size over fleet.yaml's
  ``canary_limits.max_instance_count`` raises ``CanaryLimitError`` before anything changes.
- ``grow_primary``: before the promotion, the primary asked for as many instances as serve users now.
- ``ensure``: whether the variant serves its count yet (the endpoint InService); asks again if nothing goes there.
- ``release``: the canary's scalable target deregistered, before its variant is removed.

Returns ``{"variant", "count", "ready", "serving_before", "note"}``; weights are never changed here.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from fleetops.rollout.canary_target import CanaryTarget
from fleetops.rollout.endpoint_capacity import EndpointCapacity
from fleetops.rollout.step_sizing import CapacityDeps, handle, parse_capacity_request

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()


@cache
def dependencies() -> CapacityDeps:
    """The SageMaker and Application Auto Scaling adapters, built once per execution environment."""
    endpoint = EndpointCapacity()
    return CapacityDeps(describe=endpoint.describe, set_count=endpoint.set_count, targets=CanaryTarget())


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = parse_capacity_request(event)
    result = handle(request, dependencies())
    logger.info("rollout capacity", extra={"action": request.action, **result.model_dump(mode="json")})
    return result.model_dump(mode="json")
