"""What a rollout may deploy on one endpoint of ``fleet.yaml``: a pinned image in prod, a canary within its limits.

- A prod endpoint runs images by digest (``<repository>@sha256:<digest>``) only: a tag can be re-pointed to
  another image after the gates and the approver saw the release, and SageMaker pulls the image again at every
  instance launch. (The weights are pinned by the artifact gate, :mod:`fleetops.promotion.artifact_pin`.)
- The canary's instance type is one of the endpoint's ``canary_limits.instance_types`` (by default the types of
  its variants) and its count at most ``canary_limits.max_instance_count``: a request cannot start a fleet of the
  largest GPU instances. The promoted variant runs on the canary's type, so this bounds the fleet's type too.
"""

from __future__ import annotations

import re

from fleetops.config import EndpointConfig
from fleetops.rollout.request_schema import CanarySpec

#: An image reference by digest: the one form a registry cannot re-point.
IMAGE_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def image_problems(image_uri: str, repository: str, endpoint: EndpointConfig) -> list[str]:
    """A prod endpoint's image must be named by digest.

    Examples
    --------
    >>> from fleetops.config import EndpointConfig
    >>> prod = EndpointConfig.model_validate({"name": "chat", "variants": [
    ...     {"name": "primary", "capacity_rps_per_instance": 4, "baseline_rps": 1, "floor": 2, "cap": 4}]})
    >>> print(image_problems("ecr/manga-llm:v7", "ecr/manga-llm", prod)[0])  # doctest: +ELLIPSIS
    model.image_uri: 'ecr/manga-llm:v7' names a tag, ... pass ecr/manga-llm@sha256:<64 hex digits> ...
    >>> image_problems(f"ecr/manga-llm@sha256:{'a' * 64}", "ecr/manga-llm", prod)
    []
    """
    if endpoint.environment != "prod" or IMAGE_DIGEST.search(image_uri):
        return []
    return [
        f"model.image_uri: {image_uri!r} names a tag, which can be re-pointed to another image after the gates and "
        f"the approver saw this one; a prod endpoint deploys images by digest: pass {repository}@sha256:<64 hex "
        "digits> (aws ecr describe-images --repository-name <name> --image-ids imageTag=<tag> "
        "--query 'imageDetails[0].imageDigest')"
    ]


def canary_problems(canary: CanarySpec, endpoint: EndpointConfig) -> list[str]:
    """The canary's instance type and count against the endpoint's ``canary_limits``."""
    problems = []
    allowed = endpoint.canary_instance_types()
    if canary.instance_type not in allowed:
        source = (
            "the endpoint's canary_limits.instance_types"
            if endpoint.canary_limits.instance_types
            else "no canary_limits, so the endpoint's variants' types"
        )
        problems.append(
            f"canary.instance_type: {canary.instance_type!r} is not allowed on endpoint {endpoint.name!r}; allowed: "
            f"{list(allowed)} (fleet.yaml: {source})"
        )
    most = endpoint.canary_limits.max_instance_count
    if canary.instance_count > most:
        problems.append(
            f"canary.instance_count: {canary.instance_count} is above the max of {most} on endpoint "
            f"{endpoint.name!r} (fleet.yaml: the endpoint's canary_limits.max_instance_count)"
        )
    return problems
