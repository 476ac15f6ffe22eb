"""The endpoint configs a rollout and a rollback create: copies of a config that exists, with the rollout's fields.

Copy everything, then override what the rollout owns. Every field of the source config (DescribeEndpointConfig:
KMS key, data capture, async inference, explainer, shadow variants, and any field SageMaker adds later) and of each
variant it copies (volume size, routing, managed scaling, core dumps, SSM access, serverless, ...) is kept, and so
are the config's tags (ListTags). The rollout sets only :data:`OWNED_CONFIG_FIELDS` and :data:`OWNED_VARIANT_FIELDS`.

Instance counts are read from the live endpoint (DescribeEndpoint) when the config is built, so a promotion after a
scale-out keeps the instances that serve then, not the count of the morning the plan was made; a rollback's copy of
an older config (``source_count_floor``) runs the live count too, never fewer than that config's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from fleetops.validation import StrictModel

#: What DescribeEndpointConfig answers but CreateEndpointConfig does not take (botocore's model; a unit test
#: compares the two shapes, so a new answer-only field shows up there rather than as a refused create).
DESCRIBED_ONLY = frozenset({"EndpointConfigArn", "CreationTime", "ResponseMetadata"})
#: Config fields every config built here sets itself (the tags are the source's, from ListTags).
OWNED_CONFIG_FIELDS = ("EndpointConfigName", "ProductionVariants", "Tags")
#: Variant fields the rollout sets; the hosting fields (fleet.yaml's) are owned too, see :class:`ConfigPlan`.
OWNED_VARIANT_FIELDS = ("VariantName", "ModelName", "InitialInstanceCount", "InitialVariantWeight")
#: Fields a new variant does not take from the variant it copies: that variant's own capacity bounds.
NOT_INHERITED = ("ManagedInstanceScaling",)
#: Tag keys SageMaker reserves; CreateEndpointConfig refuses them.
_RESERVED_TAG_PREFIX = "aws:"


class VariantPlan(StrictModel):
    """A variant the rollout writes: a copy of ``copy_of`` (a variant of the source config) with its own fields."""

    variant_name: str = Field(min_length=1)
    copy_of: str = Field(min_length=1, description="the source config's variant whose fields it copies")
    model_name: str | None = Field(default=None, description="None: the copied variant's model")
    instance_count: int | None = Field(
        default=None, ge=1, description="None: what the endpoint runs for copy_of when the config is built"
    )
    min_instance_count: int = Field(default=1, ge=1, description="a floor under the live count")
    weight: float | None = Field(default=None, ge=0, description="None: the copied variant's live weight")
    own_capacity: bool = Field(default=False, description="a new variant: not copy_of's NOT_INHERITED fields")


class ConfigPlan(StrictModel):
    """How to build one endpoint config from the source config and the live endpoint (the builder's event)."""

    endpoint_name: str = Field(min_length=1)
    endpoint_config_name: str = Field(min_length=1, max_length=63)
    source_config_name: str = Field(min_length=1, description="the config whose fields and tags are copied")
    copy_variants: bool = Field(description="every variant of the source config, before the added ones")
    copied_weights: Literal["live", "source"] = Field(
        default="live", description="a copied variant's weight: the endpoint's now, or the source config's"
    )
    source_count_floor: bool = Field(
        default=False, description="a copied variant never runs fewer instances than the source config gives it"
    )
    add: tuple[VariantPlan, ...] = ()
    hosting: dict[str, Any] = Field(default_factory=dict, description="fleet.yaml's variant fields, on every variant")
    data_capture: dict[str, Any] | None = Field(
        default=None, description="the rollout's own DataCaptureConfig (shadow capture); None: the source's"
    )


class ConfigCopyError(ValueError):
    """The plan names a variant the source config does not have; nothing was created."""


def _present(value: Any) -> bool:
    return value is not None and value not in ({}, [])


def live_count(live: Mapping[str, Any], variant_name: str) -> int | None:
    """Instances the endpoint runs for a variant now: the larger of Current and Desired (a scale-out under way).

    Examples
    --------
    >>> live_count({"ProductionVariants": [{"VariantName": "p", "CurrentInstanceCount": 2,
    ...                                     "DesiredInstanceCount": 4}]}, "p")
    4
    >>> live_count({"ProductionVariants": []}, "p") is None
    True
    """
    for variant in [*live.get("ProductionVariants", []), *live.get("ShadowProductionVariants", [])]:
        if variant.get("VariantName") == variant_name:
            counts = [variant.get(k) for k in ("CurrentInstanceCount", "DesiredInstanceCount")]
            known = [int(c) for c in counts if c is not None]
            return max(known) if known else None
    return None


def _live_weight(live: Mapping[str, Any], variant_name: str) -> float | None:
    for variant in live.get("ProductionVariants", []):
        if variant.get("VariantName") == variant_name:
            weight = variant.get("CurrentWeight", variant.get("DesiredWeight"))
            return None if weight is None else float(weight)
    return None


def _with_count(variant: dict[str, Any], count: int | None) -> dict[str, Any]:
    # A serverless variant has no instances: it keeps ServerlessConfig and gets no count.
    if count is not None and "InitialInstanceCount" in variant:
        variant["InitialInstanceCount"] = count
    return variant


def _copied_count(source: Mapping[str, Any], live: Mapping[str, Any], floor: bool) -> int | None:
    # Not serving: None, and the variant keeps the source config's own count.
    count = live_count(live, source["VariantName"])
    if count is not None and floor:
        count = max(count, int(source.get("InitialInstanceCount") or 0))
    return count


def _copied(source: dict[str, Any], live: Mapping[str, Any], plan: ConfigPlan) -> dict[str, Any]:
    variant = _with_count(dict(source) | dict(plan.hosting), _copied_count(source, live, plan.source_count_floor))
    live_weight = _live_weight(live, source["VariantName"])
    if plan.copied_weights == "live" and live_weight is not None:
        variant["InitialVariantWeight"] = live_weight
    return variant


def _added(
    plan: VariantPlan, source: dict[str, Any], live: Mapping[str, Any], hosting: Mapping[str, Any]
) -> dict[str, Any]:
    variant = dict(source) | dict(hosting)
    if plan.own_capacity:
        for name in NOT_INHERITED:
            variant.pop(name, None)
    variant["VariantName"] = plan.variant_name
    if plan.model_name is not None:
        variant["ModelName"] = plan.model_name
    count = plan.instance_count
    if count is None:
        now = live_count(live, plan.copy_of) or int(source.get("InitialInstanceCount") or 1)
        count = max(now, plan.min_instance_count)
    variant = _with_count(variant, count)
    weight = plan.weight if plan.weight is not None else _live_weight(live, plan.copy_of)
    if weight is not None:
        variant["InitialVariantWeight"] = weight
    return variant


def build_config(
    plan: ConfigPlan, source: Mapping[str, Any], tags: Sequence[Mapping[str, str]], live: Mapping[str, Any]
) -> dict[str, Any]:
    """The CreateEndpointConfig request: ``source`` copied whole, the plan's variants and the owned fields set.

    ``source``: DescribeEndpointConfig of ``plan.source_config_name``; ``tags``: its ListTags; ``live``:
    DescribeEndpoint of the endpoint now (instance counts and weights).

    Raises
    ------
    ConfigCopyError
        When an added variant copies a variant the source config does not have.

    Examples
    --------
    >>> source = {"EndpointConfigName": "v6", "EndpointConfigArn": "arn:v6", "KmsKeyId": "key",
    ...           "ProductionVariants": [{"VariantName": "primary", "ModelName": "m6", "InstanceType": "ml.g5.2xlarge",
    ...                                   "InitialInstanceCount": 2, "VolumeSizeInGB": 200}]}
    >>> live = {"ProductionVariants": [{"VariantName": "primary", "CurrentInstanceCount": 5, "CurrentWeight": 1.0}]}
    >>> plan = ConfigPlan(endpoint_name="e", endpoint_config_name="v7-final", source_config_name="v6",
    ...                   copy_variants=False, add=(VariantPlan(variant_name="primary", copy_of="primary",
    ...                   model_name="m7", weight=1.0, min_instance_count=2),))
    >>> built = build_config(plan, source, [{"Key": "team", "Value": "manga"}], live)
    >>> built["KmsKeyId"], built["Tags"], built["ProductionVariants"][0]["InitialInstanceCount"]
    ('key', [{'Key': 'team', 'Value': 'manga'}], 5)
    >>> built["ProductionVariants"][0]["VolumeSizeInGB"], built["ProductionVariants"][0]["ModelName"]
    (200, 'm7')
    """
    variants = [dict(v) for v in source.get("ProductionVariants", [])]
    by_name = {v["VariantName"]: v for v in variants}
    request = {k: v for k, v in source.items() if k not in DESCRIBED_ONLY and _present(v)}
    built = [_copied(v, live, plan) for v in variants] if plan.copy_variants else []
    for added in plan.add:
        if added.copy_of not in by_name:
            raise ConfigCopyError(
                f"endpoint config {plan.source_config_name!r} has no variant {added.copy_of!r} to copy for "
                f"{added.variant_name!r} (it has {sorted(by_name)}); nothing was created"
            )
        built = [v for v in built if v["VariantName"] != added.variant_name]
        built.append(_added(added, by_name[added.copy_of], live, plan.hosting))
    shadows = [
        _with_count(dict(v), _copied_count(v, live, plan.source_count_floor))
        for v in source.get("ShadowProductionVariants", [])
    ]
    if shadows:
        request["ShadowProductionVariants"] = shadows
    if plan.data_capture is not None:
        request["DataCaptureConfig"] = plan.data_capture
    request["EndpointConfigName"] = plan.endpoint_config_name
    request["ProductionVariants"] = built
    kept = [{"Key": t["Key"], "Value": t["Value"]} for t in tags if not t["Key"].startswith(_RESERVED_TAG_PREFIX)]
    if kept:
        request["Tags"] = kept
    return request
