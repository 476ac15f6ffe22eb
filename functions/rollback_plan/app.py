"""Rollback, every pass of its loop: look at the endpoint and return the next safe action; at the end, check it.

Event: ``{"request": <rollback input>, "attempt": n, "now": <state entered time>, "execution_id": <its own>}``.
Returns one of ``wait``, ``zero_canary``, ``restore_config``, ``finish`` with what the state machine needs
to do it, or ``join`` when another rollback of the endpoint is at work. A request that names a target, a
pointer or a lease holder, a primary variant as its canary, or an endpoint fleet.yaml does not list for this stack,
fails the first pass with ``RollbackInputError`` before anything is changed. Without a canary named, fleet.yaml's
canary variant of the endpoint is the one whose traffic goes to 0.

With ``"verify": {"endpoint_name", "target_endpoint_config_name", "pointer_json"}`` (once the endpoint serves the
target config) it asks the endpoint a few times and returns the verdict
(:class:`fleetops.rollout.rollback_verify.Verdict`): passed only when every answer names the restored version.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from pydantic import BaseModel

from fleetops.aws import clients
from fleetops.aws.executions import Executions
from fleetops.aws.lease import EndpointLease
from fleetops.aws.sagemaker_endpoint import read_endpoint
from fleetops.config import load_fleet_config
from fleetops.rollout.model_pointer import ModelPointerStore, pointer_parameter
from fleetops.rollout.rollback import check_managed, parse_request, plan_rollback, resolve_canary
from fleetops.rollout.rollback_verify import VERIFY_ATTEMPTS, VerifyRequest, verify_rollback
from fleetops.rollout.version_probe import ask_versions, config_model_versions
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from fleetops.endpoint import EndpointSnapshot, LeaseInfo
    from fleetops.rollout.pointer import Pointer
    from fleetops.rollout.rollback_verify import Answer

logger = Logger()
tracer = Tracer()


class Settings(CommonSettings):
    model_pointer_prefix: str


class Event(BaseModel):
    request: dict[str, Any]  # parsed by parse_request, which names what is wrong in one RollbackInputError
    attempt: int = 0
    now: datetime
    execution_id: str = ""
    verify: VerifyRequest | None = None


@dataclass(frozen=True)
class Readers:
    """What plan_rollback reads from AWS (no lease table: no lease to read), and how another rollback is doing."""

    endpoint: Callable[[str], EndpointSnapshot]
    pointer: Callable[[str], Pointer | None]
    lease: Callable[[str], LeaseInfo | None] | None
    execution_status: Callable[[str], str]
    answers: Callable[[str], list[Answer]]
    config_versions: Callable[[str], dict[str, str | None]]


# A wrong environment or fleet.yaml fails the cold start with a clear message, before any event.
settings = Settings.from_env()
# Per managed endpoint, its variants' roles: the canary variant is derived from them and a primary is refused.
roles = {
    e.name: {v.name: v.role for v in e.variants}
    for e in load_fleet_config(settings.fleet_config_path).managed_by(settings.environment_name)
}
managed = frozenset(roles)


@cache
def dependencies() -> Readers:
    """AWS adapters, built once per execution environment on its first invocation."""
    lease = EndpointLease(settings.lease_table) if settings.lease_table else None
    sagemaker = clients.client("sagemaker")
    return Readers(
        endpoint=partial(read_endpoint, client=sagemaker),
        pointer=ModelPointerStore().get,
        lease=lease.current if lease else None,
        execution_status=Executions().status,
        answers=partial(ask_versions, clients.client("sagemaker-runtime"), attempts=VERIFY_ATTEMPTS),
        config_versions=partial(config_model_versions, sagemaker),
    )


def verify(request: VerifyRequest) -> dict[str, Any]:
    deps = dependencies()
    live = deps.pointer(pointer_parameter(settings.model_pointer_prefix, request.endpoint_name))
    verdict = verify_rollback(request, partial(deps.answers, request.endpoint_name), live, deps.config_versions)
    logger.info("rollback verified", extra={"passed": verdict.passed, "reason": verdict.reason})
    return verdict.model_dump(mode="json")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parsed = Event.model_validate(event)
    if parsed.verify is not None:
        check_managed(parsed.verify.endpoint_name, managed, settings.environment_name)
        return verify(parsed.verify)
    request = parse_request(parsed.request).model_copy(update={"attempt": parsed.attempt})
    check_managed(request.endpoint_name, managed, settings.environment_name)
    request = resolve_canary(request, roles[request.endpoint_name])
    deps = dependencies()
    step = plan_rollback(
        request,
        parsed.now,
        deps.endpoint,
        deps.pointer,
        settings.model_pointer_prefix,
        deps.lease,
        parsed.execution_id,
        deps.execution_status,
    )
    logger.info(
        "rollback step",
        extra={"action": step.action, "note": step.note, "attempt": step.attempt, "aborts": step.stop_execution_arn},
    )
    return step.model_dump(mode="json")
