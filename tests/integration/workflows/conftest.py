"""Shared fixtures for the workflow tests: state machines executed from their ASL files on moto.

Emulated by this project, not by moto, and used here: SageMaker ``UpdateEndpoint`` and faithful
``Updating`` -> ``InService`` transitions, variant weight 0, real instance types
(``devtools/emulator_extensions/sagemaker.py``); CloudWatch percentile statistics
(``devtools/emulator_extensions/cloudwatch.py``); Lambda tasks running the real handlers
(``devtools/lambda_dispatch.py``). Everything else is moto over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devtools import rollout_workflow as wf
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from devtools.lambda_dispatch import cold_start_environment
from tests.conftest import load_event


@pytest.fixture
def rollout(monkeypatch: pytest.MonkeyPatch) -> Iterator[wf.RolloutWorkflow]:
    """Both workflows deployed, an endpoint ``manga-chat`` with one primary variant, handlers routed."""
    deployed = wf.deploy()
    monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 0.5)  # restored after the test
    wf.create_endpoint()
    # A cold start of every handler with this deployment's environment (its own capture key, tables, topics):
    # a handler module imported by an earlier test keeps the settings it read then.
    with cold_start_environment(deployed.environment, set(wf.FUNCTIONS.values())), wf.handlers():
        yield deployed


def rollout_request(**changes: Any) -> dict[str, Any]:
    """The sample rollout request with test-sized bake, polling and approval times."""
    request: dict[str, Any] = load_event("rollout_validate")["request"]
    request |= {
        "steps": [5, 25, 100],
        "bake_seconds": 1,
        "approval_steps": [],
        "approval": {"timeout_seconds": 30, "heartbeat_seconds": 30},
        "thresholds": {},  # the declared limits (canary_checks.yaml): a request may tighten them, never loosen
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 10},
        "max_extensions": 2,  # a starved traffic thread on a busy machine must not fail a healthy canary
    }
    return request | changes


#: Per interval: one interval alone passes the declared minimum sample (200 canary requests).
HEALTHY = {"requests": 300, "errors": 0, "latency_ms": 800, "ttft_ms": 250}
