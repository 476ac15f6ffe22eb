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

The transitions are evaluated lazily when an endpoint is read (no background thread).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class _Pending:
    ready_at: float
    config_name: str | None  # None: a weights/capacities update, the config stays
    variants: list[dict[str, Any]] = field(default_factory=list)


behaviour = Behaviour()


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


def _settle(endpoint: FakeEndpoint) -> None:
    """Finish a pending update whose time has come."""
    pending: _Pending | None = getattr(endpoint, "_fleet_pending", None)
    if pending is None or time.monotonic() < pending.ready_at:
        return
    if pending.config_name is not None:
        endpoint.endpoint_config_name = pending.config_name
    endpoint.production_variants = pending.variants
    endpoint.endpoint_status = "InService"
    endpoint._fleet_pending = None  # type: ignore[attr-defined]


def _endpoint_or_error(backend: SageMakerModelBackend, endpoint_name: str) -> FakeEndpoint:
    endpoint = backend.endpoints.get(endpoint_name)
    if endpoint is None:
        arn = FakeEndpoint.arn_formatter(endpoint_name, backend.account_id, backend.region_name)
        raise ValidationError(message=f'Could not find endpoint "{arn}".')
    _settle(endpoint)
    if endpoint.endpoint_status != "InService":
        raise ValidationError(message=f'Cannot update in-progress endpoint "{endpoint.arn}".')
    return endpoint


def _start_update(endpoint: FakeEndpoint, pending: _Pending) -> str:
    endpoint.endpoint_status = "Updating"
    endpoint._fleet_pending = pending  # type: ignore[attr-defined]
    _settle(endpoint)  # update_seconds == 0 finishes at once
    return str(endpoint.arn)


def update_endpoint(self: SageMakerModelBackend, endpoint_name: str, endpoint_config_name: str) -> str:
    """Backend side of ``UpdateEndpoint`` (RetainAllVariantProperties and deployment configs are not emulated)."""
    endpoint = _endpoint_or_error(self, endpoint_name)
    config = self.endpoint_configs.get(endpoint_config_name)
    if config is None:
        arn = FakeEndpointConfig.arn_formatter(endpoint_config_name, self.account_id, self.region_name)
        raise ValidationError(message=f"Could not find endpoint configuration '{arn}'.")
    variants = endpoint._process_production_variants(config.production_variants)
    return _start_update(
        endpoint, _Pending(time.monotonic() + behaviour.update_seconds, endpoint_config_name, variants)
    )


def update_endpoint_weights_and_capacities(
    self: SageMakerModelBackend, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
) -> str:
    """Backend side of ``UpdateEndpointWeightsAndCapacities``: omitted counts and weights are kept."""
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
            _settle(endpoint)
        return original(self, endpoint_name)  # type: ignore[no-any-return]

    return describe_endpoint


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
    SageMakerResponse.update_endpoint = _response_update_endpoint  # type: ignore[attr-defined]
    SageMakerResponse._fleet_patched = True  # type: ignore[attr-defined]
