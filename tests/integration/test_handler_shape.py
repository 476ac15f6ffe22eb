"""Every Lambda handler has the one shape CONTRIBUTING.md describes: checked on its source and by importing it."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import boto3
import pytest

from tests.conftest import REPO

FUNCTIONS = REPO / "functions"
HANDLERS = sorted(path.parent.name for path in FUNCTIONS.glob("*/app.py"))
CONFIG = REPO / "layers/core/fleet_config"
#: Every variable some handler's Settings requires, as its deployed configuration would set it.
ENVIRONMENT = {
    "AUDIT_TABLE": "audit",
    "LEASE_TABLE": "lease",
    "CALENDAR_TABLE": "calendar",
    "APPROVAL_TABLE": "approvals",
    "APPROVAL_URL": "https://approve.example.com/",
    "ROLLOUT_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:manga-llm-fleet-canary-rollout",
    "MODEL_POINTER_PREFIX": "/manga-llm-fleet/models",
    "MODEL_EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/manga-llm-sagemaker-execution",
    "MODEL_IMAGE_REPOSITORY": "123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm",
    "MODEL_ARTIFACT_BUCKET": "manga-llm-artifacts",
    "ARTIFACT_ROOT": "s3://artifacts/bedrock-imports/",
    "ALARM_NAME_PREFIX": "manga-llm-fleet-remediation-",
    "REMEDIATION_STATE_TABLE": "remediation-state",
    "IDEMPOTENCY_TABLE": "idempotency",
    "FLEET_CONFIG_PATH": str(CONFIG / "fleet.yaml"),
    "PLAYBOOK_PATH": str(CONFIG / "playbook.yaml"),
}


def _handler_decorators(folder: str) -> tuple[list[str], set[str]]:
    """The handler's decorators as written, and the names the module binds at its top level."""
    tree = ast.parse((FUNCTIONS / folder / "app.py").read_text())
    handler = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "lambda_handler")
    bound = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return [ast.unparse(d) for d in handler.decorator_list], bound


@pytest.mark.parametrize("folder", HANDLERS)
def test_log_state_is_cleared_and_metrics_are_flushed_where_the_function_counts(folder: str) -> None:
    decorators, bound = _handler_decorators(folder)
    assert decorators[0].startswith("logger.inject_lambda_context(clear_state=True"), decorators
    flush = ["metrics.log_metrics"] if "metrics" in bound else []
    assert decorators[1:] == [*flush, "tracer.capture_lambda_handler"]


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("an AWS client was built at import; build it in dependencies()")


@pytest.mark.parametrize("folder", HANDLERS)
def test_importing_a_handler_reads_its_settings_and_builds_no_aws_client(
    folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("client", "resource"):  # the module functions and the sessions (Powertools builds its own)
        monkeypatch.setattr(boto3, name, _refuse)
        monkeypatch.setattr(boto3.session.Session, name, _refuse)
    for key, value in ENVIRONMENT.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location(f"shape_{folder}_app", FUNCTIONS / folder / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    assert callable(getattr(module, "dependencies", None)), "adapters are built by a @cache dependencies()"


#: What a handler's cold import must not load, with why: each was measured in its cold start (bench/handler_import.py).
LEFT_OUT: dict[str, tuple[str, ...]] = {
    # Two routes on one path do not need Powertools' event handler and its event classes (~50 ms).
    "approval_endpoint": ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes"),
    # Checking a request needs its schema, not the planner, the fleet file, the canary checks or the approvals.
    "rollout_request": (
        "aws_lambda_powertools.event_handler",
        "aws_lambda_powertools.utilities.data_classes",
        "fleetops.rollout.plan",
        "fleetops.config",
        "fleetops.rollout.checks",
        "fleetops.rollout.approval",
    ),
    # Reading fleet.yaml needs the AMI list, not the model contract's models.
    "alarm_responder": ("fleetops.model_contract",),
    # Pre-scaling reads the playbook's rails (the raise hold), not its alarms.
    "prescale": ("fleetops.model_contract", "fleetops.remediation.models"),
    "rollback_plan": ("fleetops.model_contract",),
}


@pytest.mark.parametrize("folder", sorted(LEFT_OUT))
def test_a_cold_import_leaves_out_what_the_handler_does_not_need(folder: str) -> None:
    probe = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('app', {str(FUNCTIONS / folder / 'app.py')!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['app'] = module\n"
        "spec.loader.exec_module(module)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    path = os.pathsep.join([str(FUNCTIONS / folder), str(REPO / "layers/core")])
    env = {**os.environ, **ENVIRONMENT, "PYTHONPATH": path, "AWS_DEFAULT_REGION": "us-east-1"}
    env |= {"POWERTOOLS_SERVICE_NAME": "shape", "POWERTOOLS_METRICS_NAMESPACE": "shape"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m in LEFT_OUT[folder]] == []
