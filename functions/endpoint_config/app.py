"""Canary rollout and rollback: build one endpoint config from a config that exists, and create it.

Event (from the state machine): a :class:`fleetops.rollout.config_copy.ConfigPlan` (the rollout plan's
``canary_config``, ``shadow_config`` or ``final_config``, or a rollback step's ``restore_config``). Every field and
tag of the source config is copied, the rollout's own fields set, and instance counts read from the endpoint now,
so the promoted config, and the old config a rollback restores, keep the instances serving then. Returns the
CreateEndpointConfig request it made.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from fleetops.rollout.config_copy import ConfigPlan
from fleetops.rollout.endpoint_configs import EndpointConfigs

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()


@cache
def dependencies() -> EndpointConfigs:
    """The SageMaker adapter, built once per execution environment."""
    return EndpointConfigs()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    plan = ConfigPlan.model_validate(event)
    request = dependencies().create(plan)
    counts = {v["VariantName"]: v.get("InitialInstanceCount") for v in request["ProductionVariants"]}
    logger.info("endpoint config created", extra={"config": plan.endpoint_config_name, "instance_counts": counts})
    return request
