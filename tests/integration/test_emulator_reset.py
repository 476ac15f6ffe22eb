"""A reset leaves nothing running that could act on the next test's (or demo part's) account.

moto's own reset clears resources but not the threads acting on them; resources of the next test have the same
names (the endpoint, the alarms, the lease), so a leftover responder event or rollback would act on them.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import boto3
import pytest
from moto.awslambda_simple.models import LambdaSimpleBackend

from devtools import emulator_extensions
from devtools.emulator import MotoServer
from devtools.emulator_extensions.events_lambda import deliveries
from devtools.state_machines import create_functions, create_role


def test_a_reset_drops_the_queued_lambda_deliveries_and_stops_the_running_executions(
    emulator: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator_extensions.install()
    # Test double: a slow Lambda handler (moto's Docker-free Lambda only echoes), held until the test lets it go.
    started, release, handled = threading.Event(), threading.Event(), []

    def slow_handler(self: LambdaSimpleBackend, name: str, qualifier: Any, body: Any, *_: Any) -> bytes:
        handled.append(json.loads(body)["detail"]["n"])
        started.set()
        release.wait(60)  # released by the timer below; long, so a busy machine cannot end it early
        return b"{}"

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", slow_handler)
    arn = create_functions(["responder"], create_role("responder"))["responder"]
    events = boto3.client("events")
    events.put_rule(Name="alarms", EventPattern=json.dumps({"source": ["aws.cloudwatch"]}))
    events.put_targets(Rule="alarms", Targets=[{"Id": "fn", "Arn": arn}])
    for n in range(3):
        events.put_events(Entries=[{"Source": "aws.cloudwatch", "DetailType": "x", "Detail": json.dumps({"n": n})}])
    assert started.wait(10)

    sfn = boto3.client("stepfunctions")
    waits = json.dumps({"StartAt": "Poll", "States": {"Poll": {"Type": "Wait", "Seconds": 60, "End": True}}})
    machine = sfn.create_state_machine(name="polls", definition=waits, roleArn=create_role("sfn"))["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=machine)["executionArn"]

    threading.Timer(0.5, release.set).start()  # the handler under way finishes; the reset waits for it
    emulator.settle()

    assert sfn.describe_execution(executionArn=execution)["status"] == "ABORTED"
    assert deliveries.all() == []
    threading.Event().wait(0.5)  # time enough for a worker to take events 1 and 2, were they still queued
    assert handled == [0]  # they were queued behind event 0: dropped, never handled
