"""What ``fleetctl endpoint create`` asks SageMaker and Application Auto Scaling for, computed before any call.

Pure: from the endpoint's ``fleet.yaml`` entry and the first model (flags over ``initial_model``) to the
CreateModel, CreateEndpointConfig and CreateEndpoint requests and the scalable targets, or to every problem at
once. The adapter (:mod:`fleetctl.endpoint_create`) only sends them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from fleetops.aws.autoscaling import resource_id
from fleetops.config import InitialModel
from fleetops.model_contract import ModelContract
from fleetops.sagemaker_names import MAX_NAME, NAME_PATTERN
from fleetops.validation import problems as pydantic_problems

if TYPE_CHECKING:
    from collections.abc import Collection

    from fleetops.config import EndpointConfig

_NAME = re.compile(NAME_PATTERN)
#: SageMaker pulls a model's image from ECR only.
_ECR_IMAGE = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9._/-]+([:@].+)$")
#: What the flags are called, for messages.
FLAGS = {
    "image_uri": "--image-uri",
    "model_data_url": "--model-data-url",
    "version": "--model-version",
    "execution_role_arn": "--execution-role-arn",
}


class ScalingTarget(BaseModel):
    variant_name: str
    resource_id: str
    min_capacity: int
    max_capacity: int


class EndpointSpec(BaseModel):
    """Every request ``endpoint create`` sends, in order."""

    endpoint_name: str
    endpoint_config_name: str
    models: list[dict[str, Any]]
    endpoint_config: dict[str, Any]
    targets: list[ScalingTarget]


class EndpointSpecError(ValueError):
    """The endpoint cannot be created as asked; ``problems`` lists every reason, each naming its flag or field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def first_model(endpoint: EndpointConfig, flags: dict[str, str | None]) -> tuple[InitialModel | None, list[str]]:
    """The flags over ``fleet.yaml``'s ``initial_model``; every missing or malformed field named.

    Examples
    --------
    >>> from fleetops.config import EndpointConfig
    >>> endpoint = EndpointConfig.model_validate({"name": "e", "environment": "dev", "variants": [
    ...     {"name": "primary", "capacity_rps_per_instance": 1, "baseline_rps": 1, "floor": 1, "cap": 2}]})
    >>> first_model(endpoint, {"version": "v1", "model_data_url": "http://x"})[1]  # doctest: +NORMALIZE_WHITESPACE
    ['--image-uri: not given and not in fleet.yaml (endpoints[e].initial_model.image_uri)',
     '--execution-role-arn: not given and not in fleet.yaml (endpoints[e].initial_model.execution_role_arn)',
     "--model-data-url: String should match pattern '^s3://[^/]+/.+'"]
    """
    merged = endpoint.initial_model.model_dump() | {k: v for k, v in flags.items() if v is not None}
    problems = [
        f"{flag}: not given and not in fleet.yaml (endpoints[{endpoint.name}].initial_model.{field})"
        for field, flag in FLAGS.items()
        if field != "model_data_url" and not merged.get(field)
    ]
    try:
        model = InitialModel.model_validate(merged)
    except ValidationError as exc:
        for problem in pydantic_problems(exc):
            field, _, message = problem.partition(": ")
            problems.append(f"{FLAGS.get(field, field)}: {message}")
        return None, problems
    if model.image_uri and not _ECR_IMAGE.match(model.image_uri):
        problems.append(
            f"--image-uri: {model.image_uri!r} is not an ECR image with a tag or digest "
            "(ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY:TAG); SageMaker pulls from ECR only"
        )
    return (None if problems else model), problems


def build_spec(
    endpoint: EndpointConfig,
    model: InitialModel,
    *,
    network_isolation: bool,
    instance_types: Collection[str],
) -> EndpointSpec:
    """The requests that create ``endpoint`` serving ``model`` on its primary variants, sized as ``fleet.yaml`` says.

    One model per variant: the container learns the variant it serves (its metrics' dimension) from its model.
    Each variant starts at its floor, carries the endpoint's ``hosting`` (AMI, start-up and download timeouts)
    and gets a scalable target from its floor to its cap.

    Raises
    ------
    EndpointSpecError
        Naming every problem: a name SageMaker would refuse, an unknown instance type.
    """
    version, role, image = model.version or "", model.execution_role_arn or "", model.image_uri or ""
    primaries = [v for v in endpoint.variants if v.role == "primary"]
    config_name = f"{endpoint.name}-{version}-config"
    problems = [
        f"variant {v.name}: instance type {v.instance_type!r} is not a SageMaker hosting instance type"
        for v in primaries
        if v.instance_type not in instance_types
    ]
    if not primaries:
        problems.append(f"endpoint {endpoint.name}: fleet.yaml lists no primary variant to serve the model")
    models: list[dict[str, Any]] = []
    variants: list[dict[str, Any]] = []
    for variant in primaries:
        model_name = f"{endpoint.name}-{version}-{variant.name}"
        contract = ModelContract(endpoint_name=endpoint.name, variant_name=variant.name, model_version=version)
        container: dict[str, Any] = {"Image": image, "Environment": contract.environment()}
        if model.model_data_url:
            container["ModelDataUrl"] = model.model_data_url
        models.append(
            {
                "ModelName": model_name,
                "ExecutionRoleArn": role,
                "PrimaryContainer": container,
                "EnableNetworkIsolation": network_isolation,
            }
        )
        variants.append(
            {
                "VariantName": variant.name,
                "ModelName": model_name,
                "InstanceType": variant.instance_type,
                "InitialInstanceCount": variant.floor,
                "InitialVariantWeight": 1.0,
                **endpoint.hosting.variant_fields(),
            }
        )
    names = [endpoint.name, config_name, *(m["ModelName"] for m in models)]
    problems += [
        f"{name}: not a SageMaker name (letters, digits and hyphens, at most {MAX_NAME} characters); "
        "shorten the endpoint, variant or --model-version"
        for name in names
        if len(name) > MAX_NAME or not _NAME.match(name)
    ]
    if problems:
        raise EndpointSpecError(problems)
    return EndpointSpec(
        endpoint_name=endpoint.name,
        endpoint_config_name=config_name,
        models=models,
        endpoint_config={"EndpointConfigName": config_name, "ProductionVariants": variants},
        targets=[
            ScalingTarget(
                variant_name=v.name,
                resource_id=resource_id(endpoint.name, v.name),
                min_capacity=v.floor,
                max_capacity=v.cap,
            )
            for v in primaries
        ],
    )
