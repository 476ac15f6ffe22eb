"""Settings every test shares: Powertools environment and a clean metrics registry per test."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
EVENTS = REPO / "events"

os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "manga-llm-fleet-tests")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "MangaAssistant/LLMServing")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_IDEMPOTENCY_DISABLED", "false")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def load_event(name: str) -> dict[str, Any]:
    """Load a sample event from ``events/`` by file name (without ``.json``)."""
    data: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return data


@pytest.fixture(autouse=True)
def _reset_powertools_metrics() -> Iterator[None]:
    from aws_lambda_powertools import Metrics

    yield
    Metrics().clear_metrics()
    Metrics().clear_default_dimensions()
