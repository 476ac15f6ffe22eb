"""Every endpoint config the project creates carries fleet.yaml's hosting (InferenceAmiVersion, start-up health-check
and model download timeouts) on each variant: the first one (``fleetctl endpoint create``), the rollout's canary and
promoted configs, and the one a rollback restores.

The workflows run from their ASL files on the moto server (see ``conftest.py``); the emulated stack's fleet.yaml
(``devtools/workflow_fleet.yaml``) gives the endpoint a hosting other than the schema's defaults.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.restored_config import serving_config, serving_restored
from fleetctl import awsclients
from fleetctl.cli import main
from tests.integration.workflows.conftest import HEALTHY, rollout_request

HOSTING = {
    "InferenceAmiVersion": "al2-ami-sagemaker-inference-gpu-3-1",
    "ContainerStartupHealthCheckTimeoutInSeconds": 900,
    "ModelDataDownloadTimeoutInSeconds": 600,
}


@pytest.fixture
def first_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[wf.RolloutWorkflow]:
    """Both workflows deployed; the endpoint created by ``fleetctl endpoint create`` from the stack's fleet.yaml."""
    deployed = wf.deploy()
    monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 0.5)
    for key, value in deployed.environment.items():
        monkeypatch.setenv(key, value)
    awsclients.reset()
    assert main(["--fleet", str(wf.FLEET), "--json", "endpoint", "create", "manga-chat"]) == 0
    with wf.handlers():
        yield deployed
    awsclients.reset()


def variants(config_name: str) -> dict[str, dict[str, Any]]:
    described = boto3.client("sagemaker").describe_endpoint_config(EndpointConfigName=config_name)
    return {v["VariantName"]: dict(v) for v in described["ProductionVariants"]}


def hosting(variant: dict[str, Any]) -> dict[str, Any]:
    return {key: variant.get(key) for key in HOSTING}


def test_the_first_canary_promoted_and_restored_configs_all_carry_the_hosting(
    first_endpoint: wf.RolloutWorkflow,
) -> None:
    first = serving_config(wf.ENDPOINT)
    assert first == "manga-chat-v6-config"
    assert [hosting(v) for v in variants(first).values()] == [HOSTING]

    request = rollout_request(steps=[100])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        promoted = wf.wait(wf.start_rollout(request), timeout_s=90)

    assert promoted["status"] == "SUCCEEDED", promoted
    # The canary config: the variant copied from the first config and the new canary, both with the hosting.
    canary = variants("manga-chat-llama-q4-v7-canary")
    assert sorted(canary) == ["canary", "primary"]
    assert {name: hosting(v) for name, v in canary.items()} == {"canary": HOSTING, "primary": HOSTING}
    assert serving_config(wf.ENDPOINT) == "manga-chat-llama-q4-v7-final"
    assert [hosting(v) for v in variants(serving_config(wf.ENDPOINT)).values()] == [HOSTING]

    back = {
        "endpoint_name": wf.ENDPOINT,
        "rollback_id": "ops-1",
        "canary_variant_name": "canary",
        "reason": "TTFT regression seen by support",
        "requested_by": "arn:aws:iam::123456789012:user/ayumi",
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 10},
    }
    rolled_back = wf.wait(wf.start(first_endpoint.rollback_arn, back, name="ops-1"), timeout_s=60)

    assert rolled_back["status"] == "SUCCEEDED", rolled_back
    serving_restored(wf.ENDPOINT, first)  # the first config, as the rollback's copy of it
    assert [hosting(v) for v in variants(serving_config(wf.ENDPOINT)).values()] == [HOSTING]
