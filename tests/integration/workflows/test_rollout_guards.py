"""What the canary rollout checks right before each change, executed from its ASL file on the moto server.

Before every ``SetWeights`` and ``Promote`` the rollout reads the kill switch (only ``released`` lets it go on)
and proves it still holds the endpoint's lease with the fencing token it got (``CheckLease``); before
``UpdatePointer`` the lease only. After the promotion a failure keeps the release (``PromotedWithWarnings``).
Emulated by this project: see ``conftest.py``.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.restored_config import serving_config, serving_restored
from fleetops.aws.lease import EndpointLease
from fleetops.aws.switches import ENGAGED
from tests.integration.workflows.conftest import HEALTHY, rollout_request

OLD_CONFIG = "manga-chat-v6-config"


def kill_switch_parameter(rollout: wf.RolloutWorkflow) -> str:
    return rollout.environment["KILL_SWITCH_PARAMETER"]


def waiting_at_25_percent(rollout: wf.RolloutWorkflow) -> tuple[str, str]:
    """A rollout that has set 5 % then 25 % and waits for a person before the promotion, with users at 25 %; its
    execution and approval link."""
    request = rollout_request(steps=[5, 25, 100], approval_steps=[100])
    execution = wf.start_rollout(request)
    link = wf.approval_link(rollout, "approve", execution)
    assert wf.canary_weight() == 25.0
    return execution, link


@pytest.mark.parametrize(
    ("switch", "state", "cause"),
    [
        ("engage", "KillSwitchEngaged", "the automation kill switch reads engaged"),
        ("delete", "KillSwitchUnreadable", "could not be read"),
    ],
)
def test_a_kill_switch_engaged_or_missing_mid_rollout_stops_the_next_weight_change_and_rolls_back(
    rollout: wf.RolloutWorkflow, switch: str, state: str, cause: str
) -> None:
    ssm = boto3.client("ssm")
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution, link = waiting_at_25_percent(rollout)
        if switch == "engage":
            ssm.put_parameter(Name=kill_switch_parameter(rollout), Value=ENGAGED, Type="String", Overwrite=True)
        else:
            ssm.delete_parameter(Name=kill_switch_parameter(rollout))
        assert wf.submit(link)["statusCode"] == 200
        result = wf.wait(execution, timeout_s=60)

    assert (result["status"], result["error"]) == ("FAILED", "RolledBack"), result
    assert result["cause"].startswith("KillSwitchEngaged") and cause in result["cause"], result["cause"]
    history = wf.state_history(execution)
    # 5 % and 25 % were set before the switch; the 100 % step never was.
    assert history.count("SetWeights") == 2 and "Promote" not in history
    assert history.index(state) < history.index("Rollback")
    serving_restored(wf.ENDPOINT, OLD_CONFIG)
    assert boto3.client("dynamodb").scan(TableName=rollout.lease_table)["Items"] == []


def test_a_rollout_whose_lease_was_taken_over_stops_before_its_next_weight_change(
    rollout: wf.RolloutWorkflow,
) -> None:
    """A rollback's HoldLease took the rollout's lease but its StopExecution did not land (it goes on without):
    the rollout, approved afterwards, must not move traffic under a lease that is no longer its own."""
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution, link = waiting_at_25_percent(rollout)
        taken = EndpointLease(rollout.lease_table).current(wf.ENDPOINT)
        assert taken is not None and taken.execution_arn == execution and taken.fence == 1
        boto3.client("dynamodb").update_item(  # what the rollback's HoldLease writes on a take-over
            TableName=rollout.lease_table,
            Key={"endpoint_name": {"S": wf.ENDPOINT}},
            UpdateExpression="SET holder = :h, execution_arn = :e, fence = fence + :one",
            ExpressionAttributeValues={
                ":h": {"S": "rollback/oom-canary-1"},
                ":e": {"S": "arn:aws:states:us-east-1:123456789012:execution:rollback:oom-canary-1"},
                ":one": {"N": "1"},
            },
        )
        assert wf.submit(link)["statusCode"] == 200
        result = wf.wait(execution, timeout_s=60)

    assert (result["status"], result["error"]) == ("FAILED", "LeaseLost"), result
    history = wf.state_history(execution)
    assert history[-2:] == ["CheckLease", "LeaseLost"], history
    assert history.count("SetWeights") == 2 and "Rollback" not in history
    assert wf.canary_weight() == 25.0  # untouched: the endpoint is the rollback's now
    holder = EndpointLease(rollout.lease_table).current(wf.ENDPOINT)
    assert holder is not None and (holder.holder, holder.fence) == ("rollback/oom-canary-1", 2)


def test_a_failure_after_the_promotion_keeps_the_release_and_says_what_to_fix(rollout: wf.RolloutWorkflow) -> None:
    request = rollout_request(steps=[5, 100], approval_steps=[100])
    with wf.traffic(canary=HEALTHY, primary=HEALTHY):
        execution = wf.start_rollout(request)
        link = wf.approval_link(rollout, "approve", execution)
        # The registry is gone before the promotion is recorded in it: RegisterVersion will fail.
        boto3.client("dynamodb").delete_table(TableName=rollout.registry_table)
        assert wf.submit(link)["statusCode"] == 200
        result = wf.wait(execution, timeout_s=90)

    assert result["status"] == "SUCCEEDED", result
    history = wf.state_history(execution)
    assert history.index("RegisterVersion") < history.index("PromotedWithWarnings")
    assert "Rollback" not in history and history[-1] == "PromotedButIncomplete", history
    assert serving_config(wf.ENDPOINT) == "manga-chat-llama-q4-v7-final"  # the release stays
    pointer = boto3.client("ssm").get_parameter(Name=f"{wf.POINTER_PREFIX}/{wf.ENDPOINT}")["Parameter"]["Value"]
    assert json.loads(pointer)["version"] == "v7"
    notes: list[dict[str, Any]] = wf.notifications(rollout, wait_s=2)
    [warning] = [n for n in notes if "promoted with warnings" in n["Subject"]]
    assert "ResourceNotFound" in warning["Message"] and "do not roll back" in warning["Message"], warning
    assert boto3.client("dynamodb").scan(TableName=rollout.lease_table)["Items"] == []
