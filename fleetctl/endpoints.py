"""Which endpoint a command is about, and a clear answer when it does not exist."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetctl import awsclients
from fleetctl.errors import CliError, ExitCode
from fleetctl.stack import Stack

if TYPE_CHECKING:
    from fleetops.endpoint import EndpointSnapshot


def choose(stack: Stack, endpoint_name: str | None) -> str:
    """The endpoint named, else the stack's ``RemediatedEndpointName``."""
    name = endpoint_name or stack.default_endpoint
    if not name:
        raise CliError(ExitCode.USAGE, "no endpoint named", "name the endpoint: fleetctl status ENDPOINT")
    return name


def existing() -> list[str]:
    """The SageMaker endpoints of this account and region (for "did you mean")."""
    sagemaker = awsclients.client("sagemaker")
    names: list[str] = []
    kwargs: dict[str, object] = {"MaxResults": 100}
    while True:
        page = sagemaker.list_endpoints(**kwargs)
        names += [e["EndpointName"] for e in page["Endpoints"]]
        if not page.get("NextToken"):
            return sorted(names)
        kwargs["NextToken"] = page["NextToken"]


def not_found(endpoint_name: str, stack: Stack) -> CliError:
    known = existing()
    return CliError(
        ExitCode.NOT_FOUND,
        f"endpoint {endpoint_name!r} does not exist in {stack.region or 'this region'}",
        f"endpoints here: {', '.join(known) or 'none'} (check the name, --region and --stack)",
    )


def read(endpoint_name: str, stack: Stack) -> EndpointSnapshot:
    """The endpoint as SageMaker describes it, or a not-found error naming the endpoints that exist."""
    from fleetops.aws.sagemaker_endpoint import EndpointMissingError, read_endpoint

    try:
        return read_endpoint(endpoint_name, client=awsclients.client("sagemaker"))
    except EndpointMissingError:
        raise not_found(endpoint_name, stack) from None
