"""What Application Auto Scaling does to a SageMaker variant's instance count, added to moto 5.2.5 by this project.

moto stores scalable targets and scheduled actions but never changes what they scale: on the local system a raised
MinCapacity (the pre-scaler's level, the alarm responder's raise) left the variant at its instance count, and the
serving count the responder steps from, the ``InvocationsPerInstance`` the runtime publishes and ``fleetctl
status`` never moved. Here, for a ``sagemaker:variant:DesiredInstanceCount`` target, as the Application Auto
Scaling user guide describes:

- **RegisterScalableTarget**: a variant whose instance count lies outside the target's new
  ``[MinCapacity, MaxCapacity]`` is brought to the nearer bound, through ``UpdateEndpointWeightsAndCapacities``
  (the endpoint is ``Updating`` for the emulated update time, then ``InService`` at the new count).
- **Scheduled actions** (``at(...)`` in their ``Timezone``): once their time has passed, the action's
  MinCapacity and MaxCapacity become the target's, and the count is brought inside them as above.
- An endpoint that is not ``InService`` is scaled once it is (Application Auto Scaling retries too).

Evaluated lazily, like the SageMaker emulator's transitions: when an endpoint or a scalable target is read or
registered, and before the runtime routes a request (no thread of its own).

Not emulated: target tracking and step scaling policies (no alarms are created for them: the local system's
capacity comes from MinCapacity alone), ``cron``/``rate`` schedules, StartTime/EndTime, suspended scaling.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from moto.applicationautoscaling.models import (
    ApplicationAutoscalingBackend,
    FakeScalableTarget,
    applicationautoscaling_backends,
)
from moto.sagemaker.models import SageMakerModelBackend, sagemaker_backends

from devtools.emulator_extensions import sagemaker
from fleetops.aws.autoscaling import DIMENSION, NAMESPACE

_RESOURCE = re.compile(r"endpoint/(?P<endpoint>[^/]+)/variant/(?P<variant>[^/]+)")
_AT = re.compile(r"at\((?P<local>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)")
_LOCK = threading.RLock()


def _runs_at(schedule: str, timezone: str | None) -> datetime | None:
    match = _AT.fullmatch(schedule.strip())
    if match is None:
        return None
    return datetime.fromisoformat(match["local"]).replace(tzinfo=ZoneInfo(timezone or "UTC"))


def _targets(backend: ApplicationAutoscalingBackend, endpoint_name: str | None = None) -> list[FakeScalableTarget]:
    found = []
    for target in backend.targets.get(DIMENSION, {}).values():
        match = _RESOURCE.fullmatch(target.resource_id)
        if target.service_namespace == NAMESPACE and match and endpoint_name in (None, match["endpoint"]):
            found.append(target)
    return found


def _run_due_actions(backend: ApplicationAutoscalingBackend, now: datetime) -> None:
    """Every ``at(...)`` action whose time has passed sets its target's capacity limits, once."""
    for action in backend.scheduled_actions:
        if getattr(action, "_fleet_ran", None) == (action.schedule, action.timezone):
            continue  # before parsing: this runs at every request the emulated runtime routes
        when = _runs_at(action.schedule, action.timezone)
        if when is None or when > now:
            continue
        target = backend.targets.get(action.scalable_dimension, {}).get(action.resource_id)
        if target is not None:
            limits: dict[str, Any] = action.scalable_target_action or {}  # type: ignore[assignment]  # moto: str
            target.update(limits.get("MinCapacity"), limits.get("MaxCapacity"), None)  # type: ignore[arg-type]
        action._fleet_ran = (action.schedule, action.timezone)  # type: ignore[attr-defined]


def _bring_inside(sagemaker_backend: SageMakerModelBackend, target: FakeScalableTarget) -> None:
    """The variant's count into the target's limits, if its endpoint is in service (else on a later read)."""
    match = _RESOURCE.fullmatch(target.resource_id)
    endpoint = sagemaker_backend.endpoints.get(match["endpoint"]) if match else None
    if match is None or endpoint is None:
        return
    sagemaker.settle(endpoint)
    if endpoint.endpoint_status != "InService":
        return
    variant = next((v for v in endpoint.production_variants if v["VariantName"] == match["variant"]), None)
    count = variant.get("DesiredInstanceCount") if variant else None
    if count is None:
        return
    low, high = target.min_capacity or 0, target.max_capacity or count
    wanted = min(max(count, low), high)
    if wanted != count:
        desired = [{"VariantName": match["variant"], "DesiredInstanceCount": wanted}]
        sagemaker.update_endpoint_weights_and_capacities(sagemaker_backend, endpoint.endpoint_name, desired)


def scale(account_id: str, region: str, endpoint_name: str | None = None, now: datetime | None = None) -> None:
    """Run the due scheduled actions and bring every variant (of ``endpoint_name``) inside its target's limits."""
    with _LOCK:
        backend = applicationautoscaling_backends[account_id][region]
        _run_due_actions(backend, now or datetime.now(UTC))
        for target in _targets(backend, endpoint_name):
            _bring_inside(sagemaker_backends[account_id][region], target)


def _register(original: Any) -> Any:
    def register_scalable_target(self: ApplicationAutoscalingBackend, *args: Any, **kwargs: Any) -> Any:
        target = original(self, *args, **kwargs)
        scale(self.account_id, self.region_name)
        return target

    return register_scalable_target


def _put_action(original: Any) -> Any:
    def put_scheduled_action(self: ApplicationAutoscalingBackend, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        scale(self.account_id, self.region_name)  # an action whose time has passed runs now
        return result

    return put_scheduled_action


def _describe_targets(original: Any) -> Any:
    def describe_scalable_targets(self: ApplicationAutoscalingBackend, *args: Any, **kwargs: Any) -> Any:
        scale(self.account_id, self.region_name)
        return original(self, *args, **kwargs)

    return describe_scalable_targets


def _describe_endpoint(original: Any) -> Any:
    def describe_endpoint(self: SageMakerModelBackend, endpoint_name: str) -> Any:
        scale(self.account_id, self.region_name, endpoint_name)
        return original(self, endpoint_name)

    return describe_endpoint


def install() -> None:
    """Patch moto's Application Auto Scaling and SageMaker backends in this process (idempotent; after
    :func:`devtools.emulator_extensions.sagemaker.install`)."""
    if getattr(ApplicationAutoscalingBackend, "_fleet_patched", False):
        return
    backend = ApplicationAutoscalingBackend
    backend.register_scalable_target = _register(backend.register_scalable_target)  # type: ignore[method-assign]
    backend.put_scheduled_action = _put_action(backend.put_scheduled_action)  # type: ignore[method-assign]
    backend.describe_scalable_targets = _describe_targets(backend.describe_scalable_targets)  # type: ignore[method-assign]
    SageMakerModelBackend.describe_endpoint = _describe_endpoint(SageMakerModelBackend.describe_endpoint)  # type: ignore[method-assign]
    backend._fleet_patched = True  # type: ignore[attr-defined]
