"""``fleetctl`` against the emulator: a stack whose outputs name the local resources, the CLI run in-process.

The CLI runs in this process (``fleetctl.cli.main``) so that the workflows' Lambda tasks reach the project's
real handlers through :mod:`devtools.lambda_dispatch`, as in the workflow tests; one test runs the installed
``fleetctl`` command itself. AWS is reached only over HTTP through the moto server (``AWS_ENDPOINT_URL``).
The stack's IAM-authorised function URLs (rollout requests, approvals) are served by a test double,
:mod:`devtools.function_url`, that resolves the signer through the emulator's IAM and runs the real handlers.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import jsonschema  # type: ignore[import-untyped]  # no types-jsonschema in the dev environment
import pytest
from referencing import Registry, Resource

from devtools import function_url, operator_stack
from devtools import rollout_workflow as wf
from devtools.emulator_extensions import sagemaker as emulated_sagemaker
from fleetctl import awsclients
from fleetctl.cli import main
from fleetops.metrics import SAGEMAKER_INVOCATIONS, SAGEMAKER_NAMESPACE

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.type_defs import MetricDatumTypeDef

SNAPSHOTS = Path(__file__).parent / "snapshots"
SCHEMAS = Path(__file__).resolve().parents[3] / "fleetctl" / "schemas"
#: Every command below runs "now" at this time, so the snapshots do not move with the clock.
NOW = "2026-12-01T00:00:00Z"
NOW_TIME = datetime(2026, 12, 1, tzinfo=UTC)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        """The command's JSON document. The workflows' handlers run in this process and their Powertools logs
        (one JSON object per line) land on the same stdout; the command's own document is indented."""
        lines = self.out.splitlines()
        start = max(i for i, line in enumerate(lines) if line in ("{", "["))
        return json.loads("\n".join(lines[start:]))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run ``fleetctl ARGS`` against the emulated stack; returns its exit code and output."""
    monkeypatch.setenv("FLEETCTL_STACK", operator_stack.STACK)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(["--now", NOW, *args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    """fleetctl caches its clients per process; each test starts with new ones (credentials are read at creation)."""
    awsclients.reset()
    yield
    awsclients.reset()


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[operator_stack.OperatorStack]:
    """The emulated stack ``manga-llm-fleet`` with the endpoint ``manga-chat-prod``; workflow handlers routed,
    its function URLs served locally (test double)."""
    with function_url.serve(*operator_stack.URL_FUNCTIONS) as urls:
        deployed = operator_stack.deploy(urls=urls)
        monkeypatch.setattr(emulated_sagemaker.behaviour, "update_seconds", 0.5)
        for key, value in deployed.workflow.environment.items():
            monkeypatch.setenv(key, value)
        with wf.handlers():
            yield deployed


@dataclass(frozen=True)
class Person:
    """An IAM user on the emulator, with the access key fleetctl signs with when signed in as them."""

    arn: str
    environment: dict[str, str]


@pytest.fixture
def people(stack: operator_stack.OperatorStack) -> dict[str, Person]:
    """alice (requests rollouts) and bob (approves them): two IAM users of the emulated account."""
    return {name: Person(*function_url.create_user(name)) for name in ("alice", "bob")}


@pytest.fixture
def sign_in(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``sign_in(person)``: fleetctl's next AWS calls use that person's access key (no session token)."""

    def use(person: Person) -> None:
        for key, value in person.environment.items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        awsclients.reset()

    return use


def check_schema(document: Any, schema_name: str) -> None:
    """Validate ``document`` against ``fleetctl/schemas/<schema_name>.json`` (with the schemas it refers to)."""
    resources = [
        (path.name, Resource.from_contents(json.loads(path.read_text()))) for path in sorted(SCHEMAS.glob("*.json"))
    ]
    registry = Registry().with_resources(resources)
    schema = json.loads((SCHEMAS / f"{schema_name}.json").read_text())
    jsonschema.Draft202012Validator(
        schema, registry=registry, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(document)


def check_snapshot(name: str, text: str) -> None:
    """Compare what a person sees with ``snapshots/<name>.txt``; ``UPDATE_SNAPSHOTS=1`` rewrites it."""
    actual = "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(actual)
    expected = path.read_text() if path.exists() else ""
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "expected", "actual"))
        pytest.fail(f"output differs from {path.name} (UPDATE_SNAPSHOTS=1 rewrites it):\n{diff}")


def put_invocations(
    days: int,
    rps: Callable[[datetime], float],
    end: datetime = NOW_TIME,
    endpoint: str = operator_stack.ENDPOINT,
    variant: str = "primary",
) -> None:
    """``days`` of the variant's five-minute ``Invocations`` sums before ``end``, as SageMaker would have published
    them, at ``rps(slot start)`` requests/s (the history the reconciler forecasts from; weeks of traffic cannot be
    replayed here)."""
    data: list[MetricDatumTypeDef] = []
    at = end - timedelta(days=days)
    while at < end:
        data.append(
            {
                "MetricName": SAGEMAKER_INVOCATIONS,
                "Dimensions": [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": variant}],
                "Timestamp": at,
                "Value": rps(at) * 300,
                "Unit": "None",
            }
        )
        at += timedelta(minutes=5)
    cloudwatch = boto3.client("cloudwatch")
    for i in range(0, len(data), 1000):
        cloudwatch.put_metric_data(Namespace=SAGEMAKER_NAMESPACE, MetricData=data[i : i + 1000])
