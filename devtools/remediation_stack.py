"""Create, on the emulator, what ``template.yaml`` creates for the alarm responder (tests, bench and demo only).

On top of :func:`devtools.aws_resources.create_core_resources`: the remediation-state and idempotency tables
(keys from :mod:`fleetops.tables`), an SQS inbox subscribed to the operations topic (to read notifications),
and an endpoint with the given variants registered with Application Auto Scaling.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from devtools.aws_resources import (
    CoreResources,
    create_core_resources,
    create_endpoint,
    create_inbox,
    create_table,
    read_inbox,
)
from fleetops.metrics import NAMESPACE
from fleetops.tables import IDEMPOTENCY_PK, REMEDIATION_STATE_PK

REPO = Path(__file__).resolve().parents[1]
PLAYBOOK = REPO / "layers/core/fleet_config/playbook.yaml"
HANDLER = REPO / "functions/alarm_responder/app.py"


@dataclass
class RemediationStack:
    core: CoreResources
    prefix: str
    state_table: str
    idempotency_table: str
    inbox_url: str
    fleet_path: Path
    rollback_arn: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        """What template.yaml gives the AlarmResponderFunction (Globals included)."""
        return {
            "POWERTOOLS_SERVICE_NAME": "manga-llm-fleet",
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            **self.core.environment(),
            "ALARM_NAME_PREFIX": self.prefix,
            "REMEDIATION_STATE_TABLE": self.state_table,
            "IDEMPOTENCY_TABLE": self.idempotency_table,
            "ROLLBACK_STATE_MACHINE_ARN": self.rollback_arn,
            "PLAYBOOK_PATH": str(PLAYBOOK),
            "FLEET_CONFIG_PATH": str(self.fleet_path),
            "DRY_RUN": "false",
            "READY_TIMEOUT_SECONDS": "5",
            **self.extra_env,
        }

    def notifications(self) -> list[dict[str, Any]]:
        """Messages the operations topic delivered since the last call (SNS -> SQS inbox)."""
        return read_inbox(self.inbox_url)


def create_remediation_stack(
    stack_name: str, fleet_path: Path, endpoint_name: str, variants: dict[str, tuple[int, int, int]]
) -> RemediationStack:
    """``variants`` maps variant name to (initial instances, MinCapacity, MaxCapacity)."""
    core = create_core_resources(stack_name)
    create_endpoint(endpoint_name, variants)
    inbox = create_inbox(core.topic_arn, f"{stack_name}-ops-inbox")
    return RemediationStack(
        core=core,
        prefix=f"{stack_name}-remediation-",
        state_table=create_table(f"{stack_name}-remediation-state", REMEDIATION_STATE_PK),
        idempotency_table=create_table(f"{stack_name}-idempotency", IDEMPOTENCY_PK),
        inbox_url=inbox,
        fleet_path=fleet_path,
    )


@contextmanager
def cold_start(stack: RemediationStack, module_name: str = "alarm_responder_app") -> Iterator[ModuleType]:
    """Import ``functions/alarm_responder/app.py`` afresh with the stack's environment, as a Lambda cold start.

    The environment is restored and the module forgotten afterwards.
    """
    env = stack.environment()
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        spec = importlib.util.spec_from_file_location(module_name, HANDLER)
        if spec is None or spec.loader is None:
            raise ImportError(f"no handler at {HANDLER}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(module_name, None)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
