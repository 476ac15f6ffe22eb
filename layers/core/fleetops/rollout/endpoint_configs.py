"""Build and create an endpoint config from the one that exists and the live endpoint (the SageMaker adapter).

The pure part is :func:`fleetops.rollout.config_copy.build_config`; this reads what it copies and creates the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetops.aws import clients
from fleetops.aws.retry import error_code
from fleetops.rollout.config_copy import ConfigPlan, build_config

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


class EndpointConfigs:
    """Read a config with its tags, and create the copy a :class:`ConfigPlan` describes.

    Examples
    --------
    >>> class SageMaker:  # in-memory stand-in: one config with a tag, an endpoint scaled out to 3
    ...     created = []
    ...     def describe_endpoint_config(self, EndpointConfigName):
    ...         variant = {"VariantName": "primary", "ModelName": "m6", "InstanceType": "ml.g5.2xlarge",
    ...                    "InitialInstanceCount": 1, "InitialVariantWeight": 1.0}
    ...         return {"EndpointConfigName": EndpointConfigName, "EndpointConfigArn": "arn:c",
    ...                 "ProductionVariants": [variant]}
    ...     def list_tags(self, ResourceArn, **page):
    ...         return {"Tags": [{"Key": "team", "Value": "manga"}]}
    ...     def describe_endpoint(self, EndpointName):
    ...         return {"ProductionVariants": [{"VariantName": "primary", "CurrentInstanceCount": 3}]}
    ...     def create_endpoint_config(self, **request):
    ...         self.created.append(request)
    >>> plan = ConfigPlan(endpoint_name="e", endpoint_config_name="e-v7-restored", source_config_name="e-v6",
    ...                   copy_variants=True, copied_weights="source")
    >>> EndpointConfigs(client=SageMaker()).create(plan)["ProductionVariants"][0]["InitialInstanceCount"]
    3
    """

    def __init__(self, client: SageMakerClient | None = None) -> None:
        self._client: SageMakerClient = client or clients.client("sagemaker")

    def tags(self, config_arn: str) -> list[dict[str, str]]:
        tags: list[dict[str, str]] = []
        page: dict[str, Any] = {}
        while True:
            answer = self._client.list_tags(ResourceArn=config_arn, **page)
            tags += [{"Key": t["Key"], "Value": t["Value"]} for t in answer.get("Tags", [])]
            if not answer.get("NextToken"):
                return tags
            page = {"NextToken": answer["NextToken"]}

    def request(self, plan: ConfigPlan) -> dict[str, Any]:
        """The CreateEndpointConfig request, from the source config and the endpoint as they are now."""
        source: dict[str, Any] = dict(self._client.describe_endpoint_config(EndpointConfigName=plan.source_config_name))
        live: dict[str, Any] = dict(self._client.describe_endpoint(EndpointName=plan.endpoint_name))
        return build_config(plan, source, self.tags(source["EndpointConfigArn"]), live)

    def create(self, plan: ConfigPlan) -> dict[str, Any]:
        """Create the config; one already there under the name (a retried call) counts as created. The request."""
        request = self.request(plan)
        try:
            self._client.create_endpoint_config(**request)
        except Exception as exc:
            if not (error_code(exc) == "ValidationException" and "already existing" in str(exc)):
                raise
        return request
