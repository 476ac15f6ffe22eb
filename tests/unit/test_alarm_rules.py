"""Composite alarm rules as the emulated evaluation reads them (``devtools.alarm_rules``), the template's included."""

from __future__ import annotations

import pytest

from devtools.alarm_rules import AlarmRuleError, evaluate_rule, rule_alarms
from tests.conftest import REPO
from tests.unit.cfn_yaml import load, resources_of_type

STATES = {"long": "ALARM", "short": "OK", "new": "INSUFFICIENT_DATA"}


@pytest.mark.parametrize(
    ("rule", "fired"),
    [
        ('ALARM("long") AND ALARM("short")', False),
        ("ALARM(long) AND NOT ALARM(short)", True),
        ("ALARM(short) OR OK(short)", True),
        ("INSUFFICIENT_DATA(new) AND (FALSE OR TRUE)", True),
        ("OK(short) OR FALSE AND TRUE", True),  # AND binds tighter than OR
        ("NOT (OK(short) OR ALARM(long))", False),
        ("ALARM(arn:aws:cloudwatch:us-east-1:123456789012:alarm:long)", True),
    ],
)
def test_rules(rule: str, fired: bool) -> None:
    assert evaluate_rule(rule, STATES) is fired


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("ALARM(long) AND", "ends too early"),
        ("ALARM(long) XOR ALARM(short)", "cannot read 'XOR ALARM(short)'"),
        ("AT_LEAST(1, ALARM, (long, short))", "AT_LEAST is not emulated"),
        ("(ALARM(long)", "ends too early"),
        ("ALARM(long))", "unexpected ')'"),
        ("ALARM(gone)", "names alarm 'gone', which does not exist"),
    ],
)
def test_anything_else_is_refused_loudly(rule: str, says: str) -> None:
    with pytest.raises(AlarmRuleError, match=says.replace("(", r"\(").replace(")", r"\)")):
        evaluate_rule(rule, STATES)


def test_the_template_s_burn_rate_rules_name_their_two_windows() -> None:
    variant = load(REPO / "templates/variant_remediation.yaml")
    composites = resources_of_type(variant, "AWS::CloudWatch::CompositeAlarm")
    assert composites
    for logical_id, resource in composites.items():
        rule = resource["Properties"]["AlarmRule"]["Fn::Sub"]
        long, short = rule_alarms(rule)
        assert long != short and long.endswith("-${EndpointName}-${VariantName}"), logical_id
        assert evaluate_rule(rule, {long: "ALARM", short: "ALARM"}) and not evaluate_rule(
            rule, {long: "ALARM", short: "OK"}
        )
