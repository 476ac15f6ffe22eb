"""The emulator parses a state machine's definition once (devtools/emulator_extensions/stepfunctions.py).

moto parses a definition with its ANTLR grammar at CreateStateMachine and again at every StartExecution; kept
per definition, the parse tree is shared while each execution still builds its own evaluation components. What a
user of the emulator sees must not change: each execution its own result, a bad definition refused every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser

from devtools import emulator_extensions
from devtools.state_machines import create_role, wait

#: Each execution's own input decides its result, through a Choice and a Pass with Parameters.
DEFINITION = {
    "StartAt": "Big",
    "States": {
        "Big": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.n", "NumericGreaterThan": 10, "Next": "Yes"}],
            "Default": "No",
        },
        "Yes": {"Type": "Pass", "Parameters": {"n.$": "$.n", "big": True}, "End": True},
        "No": {"Type": "Pass", "Parameters": {"n.$": "$.n", "big": False}, "End": True},
    },
}


def test_executions_of_one_definition_parse_it_once_and_each_gets_its_own_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    emulator_extensions.install()
    parses: list[int] = []
    grammar_entry: Callable[[ASLParser], Any] = ASLParser.state_machine

    def counted(self: ASLParser) -> Any:
        parses.append(1)
        return grammar_entry(self)

    monkeypatch.setattr(ASLParser, "state_machine", counted)
    # Another definition than any other test's: the emulator's process may have parsed those already.
    definition = json.dumps({**DEFINITION, "Comment": "parsed once"})
    sfn = boto3.client("stepfunctions")
    machine = sfn.create_state_machine(name="once", definition=definition, roleArn=create_role("sfn"))
    runs = [
        sfn.start_execution(stateMachineArn=machine["stateMachineArn"], name=f"n{n}", input=json.dumps({"n": n}))
        for n in (3, 30, 4)
    ]

    outputs = [json.loads(wait(run["executionArn"])["output"]) for run in runs]
    assert outputs == [{"n": 3, "big": False}, {"n": 30, "big": True}, {"n": 4, "big": False}]
    assert len(parses) == 1  # at CreateStateMachine, not again for any execution


def test_a_definition_that_does_not_parse_is_refused_every_time() -> None:
    emulator_extensions.install()
    sfn = boto3.client("stepfunctions")
    role = create_role("sfn")
    broken = json.dumps({"StartAt": "Missing", "States": {"Only": {"Type": "Pass", "End": True, "Bogus": 1}}})
    for name in ("first", "second"):
        with pytest.raises(ClientError, match=r'ASLParserException .* at "Bogus"'):
            sfn.create_state_machine(name=name, definition=broken, roleArn=role)
