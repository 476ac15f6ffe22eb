"""``fleetctl rollback`` names no target: the rollback workflow derives where to go (README, Operate)."""

from __future__ import annotations

from typing import Any


def test_rollback_takes_no_target_config(cli: Any) -> None:
    refused = cli("rollback", "manga-chat-prod", "--to", "manga-chat-prod-v1-config", "--reason", "x")
    assert refused.code == 2 and "unrecognized arguments: --to" in refused.err  # usage error: nothing started
    assert "--to" not in cli("rollback", "--help").out
