"""``handler_import_ratio`` for the prescale handler: its cold import vs a bare Powertools handler (target <= 1.5)."""

from __future__ import annotations

from bench._importtime import REPO, import_ratio


def run() -> dict[str, float]:
    # The handler reads its settings and fleet.yaml at import, as at a Lambda cold start; its boto3 clients are built
    # on the first invocation (dependencies()), which this import ratio does not count.
    env = {
        "AUDIT_TABLE": "audit",
        "CALENDAR_TABLE": "calendar",
        "LEASE_TABLE": "lease",
        "KILL_SWITCH_PARAMETER": "/bench/kill-switch",
        "FLEET_CONFIG_PATH": str(REPO / "layers/core/fleet_config/fleet.yaml"),
        "PLAYBOOK_PATH": str(REPO / "layers/core/fleet_config/playbook.yaml"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }
    return import_ratio(REPO / "functions/prescale/app.py", env)
