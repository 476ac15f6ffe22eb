"""SageMaker endpoint updates as the API reference describes them, added to moto 5.2.5 by this project.

What moto lacks or gets wrong, and what this module does instead (every test relying on it says so):

- ``UpdateEndpoint`` is missing. Here it validates the endpoint and config, refuses an endpoint that
  is not ``InService`` with the real ``ValidationException`` "Cannot update in-progress endpoint",
  sets ``EndpointStatus`` to ``Updating`` and, once :attr:`Behaviour.update_seconds` have passed,
  switches the endpoint to the new config and back to ``InService`` (the old config stays visible
  while it updates, as on AWS).
- ``UpdateEndpointWeightsAndCapacities`` in moto finishes at once and drops instance counts that the
  request leaves out. Here it is ``Updating`` for the same time, keeps omitted counts, and refuses an
  endpoint that is already updating.
- A variant weight of 0 is dropped by moto (``if weight:``); here it is kept.
- moto's instance-type list predates ml.g5/ml.g6; here types are checked against botocore's own
  ``ProductionVariantInstanceType`` enum, i.e. the real API model.

The transitions are evaluated lazily when an endpoint is read (no background thread of this module).

Opt-in, real containers: while a :class:`Hosting` is registered (:data:`hosting`, set by
``devtools.local_sagemaker.hosting()``), CreateEndpoint and UpdateEndpoint ask it to start the
containers of the new config. The endpoint then stays ``Creating``/``Updating`` until every new
container is healthy; a container that fails makes a new endpoint ``Failed`` and rolls an update back
(``InService`` on the previous config, ``FailureReason`` set), as SageMaker does. A successful update
tells the hosting to retire what the new config no longer runs; DeleteEndpoint releases everything.
Endpoints the hosting does not take (another image, or no hosting registered) behave as above.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import botocore.session
from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import FakeEndpoint, FakeEndpointConfig, SageMakerModelBackend
from moto.sagemaker.responses import SageMakerResponse


@dataclass
class Behaviour:
    """Knobs tests turn (the server runs in the test process, so a module attribute reaches it)."""

    #: How long an update keeps the endpoint in ``Updating`` (real updates take minutes).
    update_seconds: float = 1.0
    #: An UpdateEndpoint to one of these endpoint configs takes this long instead (one slow deployment).
    update_seconds_by_config: dict[str, float] = field(default_factory=dict)


LaunchState = Literal["starting", "healthy", "failed"]


class Launch(Protocol):
    """The containers one CreateEndpoint/UpdateEndpoint started (see :class:`Hosting`)."""

    def status(self) -> tuple[LaunchState, str]:
        """``("healthy", "")`` once every new container answers ``/ping``; ``("failed", reason)`` if one cannot."""
        ...

    def commit(self) -> None:
        """The endpoint now runs the new config: serve from the new containers, retire what it no longer uses."""
        ...

    def abort(self) -> None:
        """The change failed: stop the new containers (the previous ones keep serving)."""
        ...


class Hosting(Protocol):
    """What runs real containers for endpoints (``devtools.local_sagemaker.LocalSageMaker``)."""

    def launch(
        self, backend: SageMakerModelBackend, endpoint: FakeEndpoint, config: FakeEndpointConfig
    ) -> Launch | None:
        """Start what ``config`` needs on ``endpoint``; ``None``: the endpoint is none of the hosting's business."""
        ...

    def release(self, endpoint_arn: str) -> None:
        """The endpoint is gone: stop all its containers."""
        ...

    def hosts(self, endpoint_arn: str) -> bool:
        """Whether this hosting runs the endpoint's containers (``sagemaker_runtime`` then invokes them)."""
        ...

    def serving_url(self, endpoint_arn: str, variant_name: str) -> str | None:
        """Base URL of the container serving ``variant_name`` now (``None``: none runs for it)."""
        ...


@dataclass
class _Pending:
    ready_at: float
    config_name: str | None  # None: a weights/capacities update (or a creation), the config stays
    variants: list[dict[str, Any]] = field(default_factory=list)
    launch: Launch | None = None  # containers that must become healthy first
    creating: bool = False  # a failed launch fails the endpoint instead of rolling back


behaviour = Behaviour()
#: The registered hosting, or None (the default: no containers, transitions on the clock only).
hosting: Hosting | None = None
# Endpoints settle from moto's request threads and from the hosting's monitor thread.
_LOCK = threading.RLock()


def _valid_instance_types() -> frozenset[str]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for("ProductionVariantInstanceType").enum)  # type: ignore[attr-defined]


_INSTANCE_TYPES = _valid_instance_types()


def _validate_instance_type(self: FakeEndpointConfig, instance_type: str) -> None:
    if instance_type not in _INSTANCE_TYPES:
        raise ValidationError(
            message=f"Value '{instance_type}' at 'instanceType' failed to satisfy constraint: "
            "Member must satisfy enum value set (botocore's ProductionVariantInstanceType)"
        )


def _process_production_variants(self: FakeEndpoint, production_variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    variants = []
    for source in production_variants:
        variant: dict[str, Any] = {"VariantName": source["VariantName"]}
        if source.get("InitialInstanceCount") is not None:
            variant["CurrentInstanceCount"] = variant["DesiredInstanceCount"] = source["InitialInstanceCount"]
        # moto drops a weight of 0 (`if weight:`); a canary variant is created at exactly 0.
        weight = source.get("InitialVariantWeight")
        variant["CurrentWeight"] = variant["DesiredWeight"] = float(1.0 if weight is None else weight)
        if source.get("ServerlessConfig"):
            variant["CurrentServerlessConfig"] = variant["DesiredServerlessConfig"] = source["ServerlessConfig"]
        variants.append(variant)
    return variants


def settle(endpoint: FakeEndpoint) -> None:
    """Finish a pending creation or update whose time has come (and whose containers, if any, are healthy)."""
    with _LOCK:
        pending: _Pending | None = getattr(endpoint, "_fleet_pending", None)
        if pending is None:
            return
        if pending.launch is not None:
            state, reason = pending.launch.status()
            if state == "failed":
                _fail(endpoint, pending, reason)
                return
            if state != "healthy":
                return
        if time.monotonic() < pending.ready_at:
            return
        if pending.config_name is not None:
            endpoint.endpoint_config_name = pending.config_name
        endpoint.production_variants = pending.variants
        endpoint.endpoint_status = "InService"
        endpoint._fleet_pending = None  # type: ignore[attr-defined]
        if pending.launch is not None:
            endpoint.failure_reason = None
            pending.launch.commit()


def _fail(endpoint: FakeEndpoint, pending: _Pending, reason: str) -> None:
    """A new container failed: a new endpoint fails; an update rolls back to the config still in place."""
    assert pending.launch is not None
    pending.launch.abort()
    endpoint.failure_reason = reason  # type: ignore[assignment]  # moto types it as always None
    endpoint.endpoint_status = "Failed" if pending.creating else "InService"
    endpoint._fleet_pending = None  # type: ignore[attr-defined]


def _endpoint_or_error(backend: SageMakerModelBackend, endpoint_name: str) -> FakeEndpoint:
    endpoint = backend.endpoints.get(endpoint_name)
    if endpoint is None:
        arn = FakeEndpoint.arn_formatter(endpoint_name, backend.account_id, backend.region_name)
        raise ValidationError(message=f'Could not find endpoint "{arn}".')
    settle(endpoint)
    if endpoint.endpoint_status != "InService":
        raise ValidationError(message=f'Cannot update in-progress endpoint "{endpoint.arn}".')
    return endpoint


def _start_update(endpoint: FakeEndpoint, pending: _Pending) -> str:
    endpoint.endpoint_status = "Updating"
    endpoint._fleet_pending = pending  # type: ignore[attr-defined]
    settle(endpoint)  # update_seconds == 0 finishes at once
    return str(endpoint.arn)


def update_endpoint(self: SageMakerModelBackend, endpoint_name: str, endpoint_config_name: str) -> str:
    """Backend side of ``UpdateEndpoint`` (RetainAllVariantProperties and deployment configs are not emulated)."""
    with _LOCK:
        endpoint = _endpoint_or_error(self, endpoint_name)
        config = self.endpoint_configs.get(endpoint_config_name)
        if config is None:
            arn = FakeEndpointConfig.arn_formatter(endpoint_config_name, self.account_id, self.region_name)
            raise ValidationError(message=f"Could not find endpoint configuration '{arn}'.")
        variants = endpoint._process_production_variants(config.production_variants)
        launch = hosting.launch(self, endpoint, config) if hosting is not None else None
        seconds = behaviour.update_seconds_by_config.get(endpoint_config_name, behaviour.update_seconds)
        pending = _Pending(time.monotonic() + seconds, endpoint_config_name, variants, launch)
        return _start_update(endpoint, pending)


def update_endpoint_weights_and_capacities(
    self: SageMakerModelBackend, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
) -> str:
    """Backend side of ``UpdateEndpointWeightsAndCapacities``: omitted counts and weights are kept."""
    with _LOCK:
        return _update_weights(self, endpoint_name, desired_weights_and_capacities)


def _update_weights(
    self: SageMakerModelBackend, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
) -> str:
    # Weights and counts only: no container starts (one local process stands for all of a variant's instances).
    endpoint = _endpoint_or_error(self, endpoint_name)
    variants = {v["VariantName"]: dict(v) for v in endpoint.production_variants}
    seen: set[str] = set()
    for desired in desired_weights_and_capacities:
        name = desired.get("VariantName")
        if name in seen:
            raise ValidationError(message=f'The variant name "{name}" was non-unique within the request.')
        if name not in variants:
            raise ValidationError(
                message=f'The variant name(s) "{name}" is/are not present within endpoint configuration '
                f'"{endpoint.endpoint_config_name}".'
            )
        seen.add(str(name))
        if desired.get("DesiredWeight") is not None:
            variants[name]["CurrentWeight"] = variants[name]["DesiredWeight"] = float(desired["DesiredWeight"])
        if desired.get("DesiredInstanceCount") is not None:
            count = desired["DesiredInstanceCount"]
            variants[name]["CurrentInstanceCount"] = variants[name]["DesiredInstanceCount"] = count
    pending = _Pending(time.monotonic() + behaviour.update_seconds, None, list(variants.values()))
    return _start_update(endpoint, pending)


def _describe_endpoint(original: Any) -> Any:
    def describe_endpoint(self: SageMakerModelBackend, endpoint_name: str) -> dict[str, Any]:
        endpoint = self.endpoints.get(endpoint_name)
        if endpoint is not None:
            settle(endpoint)
        return original(self, endpoint_name)  # type: ignore[no-any-return]

    return describe_endpoint


def _create_endpoint(original: Any) -> Any:
    def create_endpoint(
        self: SageMakerModelBackend, endpoint_name: str, endpoint_config_name: str, tags: list[dict[str, str]]
    ) -> FakeEndpoint:
        with _LOCK:
            endpoint: FakeEndpoint = original(self, endpoint_name, endpoint_config_name, tags)
            launch = hosting.launch(self, endpoint, self.endpoint_configs[endpoint_config_name]) if hosting else None
            if launch is not None:
                # Creating until the containers pass the ping health check (moto: InService at once).
                endpoint.endpoint_status = "Creating"
                variants = list(endpoint.production_variants)
                endpoint._fleet_pending = _Pending(time.monotonic(), None, variants, launch, creating=True)  # type: ignore[attr-defined]
                settle(endpoint)
            return endpoint

    return create_endpoint


def _delete_endpoint(original: Any) -> Any:
    def delete_endpoint(self: SageMakerModelBackend, endpoint_name: str) -> None:
        with _LOCK:
            endpoint = self.endpoints.get(endpoint_name)
            original(self, endpoint_name)
            if endpoint is not None and hosting is not None:
                hosting.release(str(endpoint.arn))

    return delete_endpoint


def _response_update_endpoint(self: SageMakerResponse) -> ActionResult:
    arn = self.sagemaker_backend.update_endpoint(  # type: ignore[attr-defined]
        endpoint_name=self._get_param("EndpointName"), endpoint_config_name=self._get_param("EndpointConfigName")
    )
    return ActionResult({"EndpointArn": arn})


def install() -> None:
    """Patch moto's SageMaker backend and responses in this process (idempotent)."""
    if getattr(SageMakerResponse, "_fleet_patched", False):
        return
    FakeEndpointConfig.validate_instance_type = _validate_instance_type  # type: ignore[method-assign]
    FakeEndpoint._process_production_variants = _process_production_variants  # type: ignore[method-assign]
    SageMakerModelBackend.update_endpoint = update_endpoint  # type: ignore[attr-defined]
    SageMakerModelBackend.update_endpoint_weights_and_capacities = update_endpoint_weights_and_capacities  # type: ignore[method-assign]
    SageMakerModelBackend.describe_endpoint = _describe_endpoint(SageMakerModelBackend.describe_endpoint)  # type: ignore[method-assign]
    SageMakerModelBackend.create_endpoint = _create_endpoint(SageMakerModelBackend.create_endpoint)  # type: ignore[method-assign]
    SageMakerModelBackend.delete_endpoint = _delete_endpoint(SageMakerModelBackend.delete_endpoint)  # type: ignore[method-assign]
    SageMakerResponse.update_endpoint = _response_update_endpoint  # type: ignore[attr-defined]
    SageMakerResponse._fleet_patched = True  # type: ignore[attr-defined]
