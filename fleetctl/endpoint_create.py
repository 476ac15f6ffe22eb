"""``fleetctl endpoint create``: the first endpoint from ``fleet.yaml``, without hand-written AWS calls.

Creates what is missing of the endpoint's models, endpoint config and endpoint (:mod:`fleetctl.endpoint_spec`
computes them), waits until it is InService and registers each variant's scalable target from its floor to
its cap, which the stack's pre-scaler and remediation expect to find. Idempotent: an endpoint that exists is
reported and never recreated; a model or config left by an interrupted run is reused; a scalable target already
registered keeps its capacity (the pre-scaler may have raised it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from fleetctl import awsclients
from fleetctl.endpoint_spec import EndpointSpec
from fleetctl.errors import CliError, ExitCode


class VariantReport(BaseModel):
    variant_name: str
    model_name: str
    instance_type: str
    initial_instance_count: int
    inference_ami_version: str | None  # None: SageMaker's default AMI (driver 470, CUDA 11.4)
    container_startup_health_check_timeout_s: int | None
    model_data_download_timeout_s: int | None


class TargetReport(BaseModel):
    variant_name: str
    min_capacity: int
    max_capacity: int
    outcome: Literal["registered", "kept", "not yet"]  # not yet: the endpoint is not InService


class EndpointReport(BaseModel):
    endpoint_name: str
    outcome: Literal["created", "exists"]
    endpoint_status: str
    endpoint_config_name: str
    created: list[str]  # what this run created, in order
    variants: list[VariantReport]
    scalable_targets: list[TargetReport]


def instance_types() -> frozenset[str]:
    """The hosting instance types SageMaker's API accepts (botocore's model of it: no call is made)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for("ProductionVariantInstanceType").enum)  # type: ignore[attr-defined]


def _missing(exc: Exception) -> bool:
    from fleetops.aws.retry import error_code

    return error_code(exc) == "ValidationException" and "Could not find" in str(exc)


def _describe(call: Callable[..., Any], **kwargs: Any) -> dict[str, Any] | None:
    try:
        return dict(call(**kwargs))
    except Exception as exc:
        if _missing(exc):
            return None
        raise


def create(spec: EndpointSpec, wait: bool, timeout_s: float, progress: Callable[[str], None]) -> EndpointReport:
    """Create what is missing, wait for InService when ``wait``, register the scalable targets.

    Raises
    ------
    CliError
        ``WORKFLOW_FAILED`` when the endpoint fails to start (SageMaker's reason), ``TIMEOUT`` when it is not
        InService within ``timeout_s`` (run the command again later to register the targets).
    """
    sagemaker = awsclients.client("sagemaker")
    name = spec.endpoint_name
    created: list[str] = []
    existing = _describe(sagemaker.describe_endpoint, EndpointName=name)
    if existing is None:
        for model in spec.models:
            if _describe(sagemaker.describe_model, ModelName=model["ModelName"]) is None:
                sagemaker.create_model(**model)
                created.append(f"model {model['ModelName']}")
        config_name = spec.endpoint_config_name
        if _describe(sagemaker.describe_endpoint_config, EndpointConfigName=config_name) is None:
            sagemaker.create_endpoint_config(**spec.endpoint_config)
            created.append(f"endpoint config {config_name}")
        sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=config_name)
        created.append(f"endpoint {name}")
    status = _status(name, wait, timeout_s, progress) if existing is None else str(existing["EndpointStatus"])
    described = sagemaker.describe_endpoint(EndpointName=name)
    targets = _register(spec, in_service=status == "InService")
    created += [f"scalable target {name}/{t.variant_name}" for t in targets if t.outcome == "registered"]
    return EndpointReport(
        endpoint_name=name,
        outcome="exists" if existing is not None else "created",
        endpoint_status=status,
        endpoint_config_name=str(described["EndpointConfigName"]),
        created=created,
        variants=_variants(str(described["EndpointConfigName"])),
        scalable_targets=targets,
    )


def _status(name: str, wait: bool, timeout_s: float, progress: Callable[[str], None]) -> str:
    from fleetops.aws.sagemaker_endpoint import EndpointNotReadyError, wait_in_service

    sagemaker = awsclients.client("sagemaker")
    if not wait:
        return str(sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"])
    progress(f"endpoint {name}: Creating (instances start and the container loads the model; minutes)")
    try:
        return wait_in_service(name, client=sagemaker, timeout_s=timeout_s, max_wait_s=30.0)
    except EndpointNotReadyError as exc:
        if exc.status in ("Failed", "OutOfService"):
            reason = sagemaker.describe_endpoint(EndpointName=name).get("FailureReason") or "no reason given"
            raise CliError(
                ExitCode.WORKFLOW_FAILED,
                f"endpoint {name} is {exc.status}: {reason}",
                "read the container's log (CloudWatch /aws/sagemaker/Endpoints/" + name + "), fix the image, model or "
                "fleet.yaml hosting, delete the endpoint (aws sagemaker delete-endpoint) and run this again",
            ) from None
        raise CliError(
            ExitCode.TIMEOUT,
            f"endpoint {name} is still {exc.status} after {timeout_s:g} s",
            "it goes on without you: run this command again once it is InService to register its scalable targets",
        ) from None


def _register(spec: EndpointSpec, in_service: bool) -> list[TargetReport]:
    from fleetops.aws.autoscaling import AutoScaling

    scaling = AutoScaling(client=awsclients.client("application-autoscaling"))
    reports = []
    for target in spec.targets:
        found = scaling.get_target(spec.endpoint_name, target.variant_name)
        if found is not None:
            report = TargetReport(
                variant_name=target.variant_name,
                min_capacity=found.min_capacity,
                max_capacity=found.max_capacity,
                outcome="kept",
            )
        elif not in_service:  # Application Auto Scaling refuses a variant that is not serving yet
            report = TargetReport(**target.model_dump(exclude={"resource_id"}), outcome="not yet")
        else:
            scaling.set_capacity(spec.endpoint_name, target.variant_name, target.min_capacity, target.max_capacity)
            report = TargetReport(**target.model_dump(exclude={"resource_id"}), outcome="registered")
        reports.append(report)
    return reports


def _variants(config_name: str) -> list[VariantReport]:
    config = awsclients.client("sagemaker").describe_endpoint_config(EndpointConfigName=config_name)
    return [
        VariantReport(
            variant_name=v["VariantName"],
            model_name=v.get("ModelName", ""),
            instance_type=v.get("InstanceType", ""),
            initial_instance_count=int(v.get("InitialInstanceCount", 0)),
            inference_ami_version=v.get("InferenceAmiVersion"),
            container_startup_health_check_timeout_s=v.get("ContainerStartupHealthCheckTimeoutInSeconds"),
            model_data_download_timeout_s=v.get("ModelDataDownloadTimeoutInSeconds"),
        )
        for v in config["ProductionVariants"]
    ]
