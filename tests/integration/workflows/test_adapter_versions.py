"""Versioned adapters on the real state machines (moto): one adapter changes, the base stays, a rollback undoes it.

The endpoint's pointer names the sample release (base ``manga-llama`` v7 with ``manga_domain`` v3); the rollout
ships ``manga_domain`` v4 on the same base, checksums and all.
"""

from __future__ import annotations

import json
from typing import Any

import boto3

from devtools import rollout_workflow as wf
from devtools.restored_config import serving_restored
from fleetops.aws.audit_table import AuditTable
from fleetops.model_contract import ModelContract
from fleetops.rollout.pointer import Pointer
from fleetops.rollout.request_schema import parse_request
from tests.integration.workflows.conftest import HEALTHY, rollout_request

PARAMETER = f"{wf.POINTER_PREFIX}/{wf.ENDPOINT}"
OLD_CONFIG = "manga-chat-v6-config"  # what the fixture's endpoint serves
MANGA_DOMAIN_V4 = {"version": "v4", "path": "adapters/manga_domain/v4", "sha256": "4" * 64}


def read_pointer() -> Pointer:
    return Pointer.model_validate_json(boto3.client("ssm").get_parameter(Name=PARAMETER)["Parameter"]["Value"])


def serving() -> Pointer:
    """Put the pointer of the release the endpoint serves: the sample request's base and adapters."""
    model = rollout_request()["model"]
    pointer = Pointer(
        model=model["name"],
        version=model["version"],
        sha256=model["sha256"],
        adapters=model["adapters"],
        sagemaker_model="manga-chat-v6-model",
        endpoint_config_name=OLD_CONFIG,
        rollout_id="v7-base",
        previous_endpoint_config_name="manga-chat-v5-config",
        previous_version="v6",
    )
    boto3.client("ssm").put_parameter(Name=PARAMETER, Value=pointer.to_json(), Type="String", Overwrite=True)
    # The fixture's model is that release's build: its answers name its version, as a rollback checks.
    sagemaker = boto3.client("sagemaker")
    image = sagemaker.describe_model(ModelName="manga-chat-v6-model")["PrimaryContainer"]["Image"]
    sagemaker.delete_model(ModelName="manga-chat-v6-model")
    contract = ModelContract(endpoint_name=wf.ENDPOINT, variant_name=wf.PRIMARY, model_version=model["version"])
    sagemaker.create_model(
        ModelName="manga-chat-v6-model",
        ExecutionRoleArn=wf.ROLE,
        PrimaryContainer={"Image": image, "Environment": contract.environment()},
    )
    return pointer


def adapter_only_request(**changes: Any) -> dict[str, Any]:
    """The sample request with manga_domain at v4: same base name, version and sha256."""
    request = rollout_request(rollout_id="manga-domain-v4", **changes)
    request["model"] = request["model"] | {"adapters": request["model"]["adapters"] | {"manga_domain": MANGA_DOMAIN_V4}}
    return request


def promote_adapter_only(rollout: wf.RolloutWorkflow) -> dict[str, Any]:
    request = adapter_only_request()
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        result = wf.wait(wf.start(rollout.rollout_arn, request, name=request["rollout_id"]), timeout_s=90)
    assert result["status"] == "SUCCEEDED", result
    return result


def test_an_adapter_only_rollout_promotes_with_the_base_unchanged_in_pointer_and_registry(
    rollout: wf.RolloutWorkflow,
) -> None:
    before = serving()

    promote_adapter_only(rollout)

    after = read_pointer()
    assert after.endpoint_config_name == "manga-chat-manga-domain-v4-final"
    assert after.release().same_base(before.release())  # name, version and sha256 of the base
    assert after.adapters is not None and before.adapters is not None
    assert after.adapters["manga_domain"].model_dump() == MANGA_DOMAIN_V4
    assert {n: a for n, a in after.adapters.items() if n != "manga_domain"} == {
        n: a for n, a in before.adapters.items() if n != "manga_domain"
    }
    assert after.previous_adapters == before.adapters and after.previous_sha256 == before.sha256
    [row] = boto3.client("dynamodb").scan(TableName=rollout.registry_table)["Items"]
    assert row["version"]["S"] == after.release_key() != before.release_key()
    assert (row["base_version"]["S"], row["sha256"]["S"]) == ("v7", before.sha256)
    assert row["adapters"]["M"]["manga_domain"]["M"]["sha256"]["S"] == MANGA_DOMAIN_V4["sha256"]
    # The audit trail and the plan say what kind of change this was.
    start, promote = AuditTable(rollout.audit_table).list(wf.ENDPOINT)
    for record in (start, promote):
        assert "adapter-only change: manga_domain v3 -> v4; base manga-llama v7 unchanged" in record.reason
    assert start.after is not None and start.after["adapters"]["manga_domain"]["version"] == "v4"


def test_a_rollback_after_an_adapter_only_promotion_restores_the_previous_adapter_versions_and_checksums(
    rollout: wf.RolloutWorkflow,
) -> None:
    before = serving()
    promote_adapter_only(rollout)
    request: dict[str, Any] = {
        "endpoint_name": wf.ENDPOINT,
        "rollback_id": "manga-domain-v4-undo",
        "canary_variant_name": "canary",
        "reason": "manga_domain v4 answers worse",
        "requested_by": "arn:aws:iam::123456789012:user/ayumi",
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 10},
    }

    result = wf.wait(wf.start(rollout.rollback_arn, request, name=request["rollback_id"]), timeout_s=60)

    assert result["status"] == "SUCCEEDED", result
    serving_restored(wf.ENDPOINT, OLD_CONFIG)  # v6's config, as the rollback's copy with the live counts
    restored = read_pointer()
    assert restored.release() == before.release()  # base and every adapter: version, folder and sha256
    assert restored.adapters is not None and restored.adapters["manga_domain"].version == "v3"
    assert restored.endpoint_config_name == OLD_CONFIG
    # Nothing older to walk back to: a second rollback cannot undo another release.
    assert restored.previous_endpoint_config_name is None


def test_a_failed_adapter_only_rollout_puts_back_the_pointer_it_started_from(rollout: wf.RolloutWorkflow) -> None:
    before = serving()
    request = adapter_only_request()

    with wf.traffic(canary=HEALTHY | {"errors": 60}, primary=HEALTHY):
        result = wf.wait(wf.start(rollout.rollout_arn, request, name=request["rollout_id"]), timeout_s=60)

    assert result["status"] == "FAILED" and result["error"] == "RolledBack", result
    value = boto3.client("ssm").get_parameter(Name=PARAMETER)["Parameter"]["Value"]
    assert json.loads(value) == json.loads(before.to_json())  # the lease row's restore pointer, adapters included
    assert boto3.client("dynamodb").scan(TableName=rollout.registry_table)["Items"] == []


def test_a_release_row_is_never_rewritten_with_another_base_checksum(rollout: wf.RolloutWorkflow) -> None:
    """A base rebuilt under an old version and key: the release stays promoted, its registry row is not touched."""
    serving()
    request = adapter_only_request()
    key = parse_request(request).model.release().release_key()
    registered = {"model_name": {"S": "manga-llama"}, "version": {"S": key}, "sha256": {"S": "9" * 64}}
    boto3.client("dynamodb").put_item(TableName=rollout.registry_table, Item=registered)

    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start(rollout.rollout_arn, request, name=request["rollout_id"])
        result = wf.wait(execution, timeout_s=90)

    assert result["status"] == "SUCCEEDED", result
    assert wf.state_history(execution)[-1] == "PromotedButIncomplete"
    assert boto3.client("dynamodb").scan(TableName=rollout.registry_table)["Items"] == [registered]
    promoted = read_pointer().adapters
    assert promoted is not None and promoted["manga_domain"].version == "v4"  # the release itself stays
    [warning] = [n for n in wf.notifications(rollout, wait_s=2) if "promoted with warnings" in n["Subject"]]
    assert "ConditionalCheckFailed" in warning["Message"], warning
