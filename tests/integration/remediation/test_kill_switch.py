"""The kill switch against SSM on the moto server: it fails closed."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from fleetops.aws.switches import ENGAGED, RELEASED, KillSwitch

NAME = "/manga-llm-fleet/automation/kill-switch"


@pytest.mark.parametrize(
    ("value", "state", "engaged"),
    [
        (RELEASED, "released", False),
        (ENGAGED, "engaged", True),
        (" Released\n", "released", False),
        ("off", "engaged", True),
    ],
)
def test_only_released_lets_automation_change_anything(value: str, state: str, engaged: bool) -> None:
    boto3.client("ssm").put_parameter(Name=NAME, Value=value, Type="String", Overwrite=True)
    switch = KillSwitch(NAME)
    assert (switch.state(), switch.engaged()) == (state, engaged)


def test_a_missing_parameter_or_none_configured_counts_as_engaged() -> None:
    assert (KillSwitch(NAME).state(), KillSwitch(NAME).engaged()) == ("missing", True)
    assert KillSwitch("").engaged() is True


def test_an_unreadable_parameter_counts_as_engaged() -> None:
    # Test double: botocore's Stubber answers AccessDenied, which the emulator does not enforce.
    client = boto3.client("ssm")
    with Stubber(client) as stub:
        stub.add_client_error("get_parameter", service_error_code="AccessDeniedException", http_status_code=400)
        switch = KillSwitch(NAME, client=client)
        assert (switch.state(), switch.engaged()) == ("unreadable", True)
