"""Tests' view of a rollback's result: the endpoint serves its target config, or the copy the rollback made of it.

A rollback restores a copy of its target with the instances serving at the restore
(:mod:`fleetops.rollout.restore_config`), so a test that asks "back on v6's config?" accepts that copy, and checks
that it is one: named after the target, with the target's variants, models, instance types, weights and tags.
"""

from __future__ import annotations

from typing import Any

import boto3

from fleetops.rollout.restore_config import restores


def serving_config(endpoint_name: str) -> str:
    """The config the endpoint is on now (DescribeEndpoint's ``EndpointConfigName``)."""
    return str(boto3.client("sagemaker").describe_endpoint(EndpointName=endpoint_name)["EndpointConfigName"])


def serves(endpoint_name: str, target: str) -> bool:
    """Whether the endpoint is on ``target`` or a rollback's copy of it (by name; see :func:`serving_restored`)."""
    return restores(endpoint_name, serving_config(endpoint_name), target)


def _shape(config_name: str) -> tuple[list[tuple[Any, ...]], list[tuple[str, str]]]:
    sagemaker = boto3.client("sagemaker")
    config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    variants = [
        (v["VariantName"], v["ModelName"], v.get("InstanceType"), v.get("InitialVariantWeight"))
        for v in config["ProductionVariants"]
    ]
    tags = sorted((t["Key"], t["Value"]) for t in sagemaker.list_tags(ResourceArn=config["EndpointConfigArn"])["Tags"])
    return variants, tags


def serving_restored(endpoint_name: str, target: str) -> dict[str, Any]:
    """DescribeEndpoint of an endpoint a rollback put back on ``target``; an AssertionError says how it is not."""
    described = dict(boto3.client("sagemaker").describe_endpoint(EndpointName=endpoint_name))
    serving = str(described["EndpointConfigName"])
    assert restores(endpoint_name, serving, target), f"{endpoint_name} serves {serving}, neither {target} nor its copy"
    if serving != target:
        assert _shape(serving) == _shape(target), (serving, _shape(serving), target, _shape(target))
    return described
