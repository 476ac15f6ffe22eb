"""Which lease each writer takes: the workflows' ASL holds the config lease, under the key fleetops.aws.lease names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetops.aws.lease import LeaseScope, lease_key
from fleetops.tables import LEASE_PK
from tests.conftest import REPO

WORKFLOWS = ["canary_rollout.asl.json", "rollback.asl.json"]


def lease_states(name: str) -> dict[str, dict[str, Any]]:
    states: dict[str, dict[str, Any]] = json.loads((REPO / "statemachines" / name).read_text())["States"]
    return {
        key: state
        for key, state in states.items()
        if state["Type"] == "Task" and state.get("Parameters", {}).get("TableName") == "${LeaseTableName}"
    }


def test_the_config_lease_is_the_row_keyed_by_the_endpoint_name_and_capacity_is_another_row() -> None:
    assert lease_key("manga-chat", LeaseScope.CONFIG) == "manga-chat"
    capacity = lease_key("manga-chat", LeaseScope.CAPACITY)
    # '#' is not allowed in a SageMaker endpoint name, so no endpoint's config row can be another's capacity row.
    assert capacity != "manga-chat" and capacity.startswith("manga-chat#")


@pytest.mark.parametrize("name", WORKFLOWS)
def test_the_workflows_take_check_and_give_back_the_config_lease(name: str) -> None:
    found = lease_states(name)
    assert found, f"{name} touches no lease"
    for state_name, state in found.items():
        ((key, value),) = state["Parameters"]["Key"].items()
        # The endpoint name as it is, which lease_key gives for the config lease: never a capacity row.
        assert key == LEASE_PK, state_name
        assert set(value) == {"S.$"} and value["S.$"].endswith(".endpoint_name"), (state_name, value)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_the_workflows_write_no_capacity_so_the_config_lease_is_all_they_need(name: str) -> None:
    states: dict[str, dict[str, Any]] = json.loads((REPO / "statemachines" / name).read_text())["States"]
    resources = [s.get("Resource", "") for s in states.values() if s["Type"] == "Task"]
    assert resources and not [r for r in resources if "applicationautoscaling" in r.lower()]
