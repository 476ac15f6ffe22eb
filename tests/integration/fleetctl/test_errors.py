"""Bad input and an unreachable AWS: a clear message, what to do next, and the documented exit code."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from devtools import operator_stack
from fleetctl.cli import build_parser
from fleetctl.errors import ExitCode
from tests.integration.fleetctl.conftest import check_schema

COMMANDS = [
    ["status"],
    ["why"],
    ["kill-switch"],
    ["calendar"],
    ["calendar", "list"],
    ["calendar", "add"],
    ["calendar", "remove"],
    ["plan"],
    ["rollout"],
    ["rollout", "start"],
    ["rollout", "status"],
    ["rollout", "approve"],
    ["rollout", "reject"],
    ["rollout", "abort"],
    ["rollback"],
    ["endpoint"],
    ["endpoint", "create"],
    ["model"],
    ["model", "package"],
    ["traffic"],
    ["traffic", "export"],
    ["completion"],
]


def test_every_command_has_help_and_the_list_is_complete(cli) -> None:
    subparsers = cast("dict[str, Any]", build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert set(subparsers) == {c[0] for c in COMMANDS} | {"simulate"}
    for command in COMMANDS:
        shown = cli(*command, "--help")
        assert shown.code == 0, command
        assert "usage: fleetctl" in shown.out and shown.err == ""
    assert "exit codes:" in cli("--help").out


@pytest.mark.parametrize("command", [["status", "nope"], ["why", "nope"]])
def test_an_unknown_endpoint_is_named_with_the_ones_that_exist(stack, cli, command) -> None:
    shown = cli(*command)

    assert shown.code == ExitCode.NOT_FOUND
    assert shown.out == ""
    assert "fleetctl: error: endpoint 'nope' does not exist in us-east-1" in shown.err
    assert "next: endpoints here: manga-chat-prod" in shown.err


def test_a_stack_that_does_not_exist(stack, cli) -> None:
    shown = cli("--stack", "manga-llm-fleet-staging", "status")

    assert shown.code == ExitCode.NOT_FOUND
    assert "stack 'manga-llm-fleet-staging' does not exist in us-east-1" in shown.err
    assert "aws cloudformation list-stacks" in shown.err


def test_no_stack_named(stack, cli, monkeypatch) -> None:
    monkeypatch.delenv("FLEETCTL_STACK")

    shown = cli("status")

    assert shown.code == ExitCode.USAGE
    assert "no stack named" in shown.err and "--stack NAME or set FLEETCTL_STACK" in shown.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["why", "--since", "2026-11-30T00:00", "--timezone", "Mars/Base"],
            "--timezone: unknown time zone 'Mars/Base'",
        ),
        (["why", "--since", "yesterday"], "--since: cannot read 'yesterday'"),
        (["status", "--actions", "many"], "argument --actions: invalid int value: 'many'"),
        (["kill-switch", "pause"], "argument action: invalid choice: 'pause'"),
    ],
)
def test_bad_input_says_what_to_write_instead(stack, cli, args, message) -> None:
    shown = cli(*args)

    assert shown.code == ExitCode.USAGE
    assert message in shown.err


def test_no_credentials(stack, cli, monkeypatch, tmp_path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    shown = cli("status")

    assert shown.code == ExitCode.AWS_ACCESS
    assert "fleetctl: error: no AWS credentials found" in shown.err
    assert "aws sts get-caller-identity" in shown.err


def test_errors_are_json_for_scripts(stack, cli) -> None:
    shown = cli("--json", "status", "nope")

    assert shown.code == ExitCode.NOT_FOUND and shown.out == ""
    error = json.loads(shown.err)
    check_schema(error, "error")
    assert error["exit_code"] == ExitCode.NOT_FOUND and "manga-chat-prod" in error["hint"]


def test_options_work_before_and_after_the_command(stack, cli) -> None:
    before = cli("--json", "--stack", operator_stack.STACK, "kill-switch", "status")
    after = cli("kill-switch", "status", "--stack", operator_stack.STACK, "--json")

    assert before.code == after.code == 0
    assert before.json() == after.json()
