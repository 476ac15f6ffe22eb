"""Settings every test shares: Powertools environment, a clean metrics registry per test, the time budget per test
(``devtools.pytest_budget``) and markers by where a test lives (tier and capability: ``pytest -m rollout``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
EVENTS = REPO / "events"
TESTS = Path(__file__).resolve().parent

pytest_plugins = ["devtools.pytest_budget"]

#: The tiers, by top folder: ``unit`` (no network), ``integration`` (emulated AWS), ``container`` (the real CPU
#: vLLM engine; the local-system tests that start engines carry that mark themselves), ``gpu``.
TIERS = ("unit", "integration", "container", "gpu")

#: One capability's tests, wherever they live (``pytest -m prescale``): a test gets the marker when a folder on its
#: path is named like it or its file's name contains one of the words. Registered in pyproject.toml.
CAPABILITIES: dict[str, tuple[str, ...]] = {
    "prescale": ("prescale", "calendar", "forecast", "plan_views"),
    "remediation": ("remediation", "alarm", "kill_switch", "lease"),
    "rollout": ("rollout", "rollback", "canary", "approval", "adapter_versions", "guardrails", "asl_contract"),
    "gateway": ("gateway", "request_log", "local_serving", "metrics_live"),
    "promotion": ("promotion", "eval_adapters", "artifact", "shadow"),
    "bedrock": ("bedrock",),
    "fleetctl": ("fleetctl", "function_url", "stack_outputs"),
    "fleetsim": ("fleetsim", "simulate"),
    "workflows": ("workflows", "state_machine", "audit_states"),
    "metrics": ("metric", "emf", "service_levels"),
    "local_system": ("local_system",),
}

os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "manga-llm-fleet-tests")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "MangaAssistant/LLMServing")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_IDEMPOTENCY_DISABLED", "false")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def load_event(name: str) -> dict[str, Any]:
    """Load a sample event from ``events/`` by file name (without ``.json``)."""
    data: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return data


def markers_for(path: Path) -> list[str]:
    """The tier and capability markers of a test file, from where it lives.

    Examples
    --------
    >>> markers_for(TESTS / "integration" / "workflows" / "test_canary_rollout.py")
    ['integration', 'rollout', 'workflows']
    """
    parts = path.resolve().relative_to(TESTS).with_suffix("").parts
    found = [parts[0]] if parts[0] in TIERS else []
    found += [name for name, words in CAPABILITIES.items() if any(w in part for part in parts for w in words)]
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if TESTS not in path.parents:
            continue
        for name in markers_for(path):
            item.add_marker(name)


@pytest.fixture(autouse=True)
def _reset_powertools_metrics() -> Iterator[None]:
    from aws_lambda_powertools import Metrics

    yield
    Metrics().clear_metrics()
    Metrics().clear_default_dimensions()
