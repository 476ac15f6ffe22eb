"""The SLO burn-rate alarms of ``templates/variant_remediation.yaml`` are the ones the playbook's ``slo`` calls for.

:func:`fleetops.remediation.burn_rate.burn_rate_alarms` computes them (objective x tier x window, thresholds from
the SLO and the burn rate); the template declares them by hand. Here every declared window alarm and composite is
held to that list, both ways: a drifted threshold, window or action, or an alarm only one side has, fails.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleetops.remediation.burn_rate import BurnRateAlarm, WindowAlarm, burn_rate_alarms
from fleetops.remediation.models import Playbook, load_playbook
from tests.conftest import REPO
from tests.unit.cfn_yaml import load, resources_of_type

VARIANT = load(REPO / "templates/variant_remediation.yaml")
MAIN = load(REPO / "template.yaml")
SLO_PREFIX = "${SloAlarmNamePrefix}"
SUFFIX = "-${EndpointName}-${VariantName}"
DIMENSIONS = [
    {"Name": "EndpointName", "Value": {"Ref": "EndpointName"}},
    {"Name": "VariantName", "Value": {"Ref": "VariantName"}},
]


@pytest.fixture(scope="module")
def playbook() -> Playbook:
    return load_playbook(REPO / "layers/core/fleet_config/playbook.yaml")


TOPIC = {"page": {"Ref": "PageTopicArn"}, "notify": {"Ref": "NotifyTopicArn"}}


def _slo_resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """``<part>`` -> properties of the ``kind`` resources named ``${SloAlarmNamePrefix}<part>-<endpoint>-<variant>``."""
    found = {}
    for resource in resources_of_type(template, kind).values():
        name = resource["Properties"]["AlarmName"]["Fn::Sub"]
        if isinstance(name, str) and name.startswith(SLO_PREFIX):
            assert name.endswith(SUFFIX), name
            found[name.removeprefix(SLO_PREFIX).removesuffix(SUFFIX)] = resource
    return found


def check_window(window: WindowAlarm, props: dict[str, Any]) -> None:
    objective = window.objective
    assert (props["EvaluationPeriods"], props.get("DatapointsToAlarm", 1)) == (1, 1), window.name
    assert float(props["Threshold"]) == window.threshold, window.name
    assert props["ComparisonOperator"] == window.comparison, window.name
    assert props["TreatMissingData"] == "notBreaching", window.name  # no traffic burns no budget
    assert "AlarmActions" not in props and "OKActions" not in props, f"{window.name}: only the composite acts"
    if objective.divided_by is None:
        watched = (props["MetricName"], props["ExtendedStatistic"], props["Period"], props["Dimensions"])
        assert watched == (objective.metric, window.statistic, window.period_seconds, DIMENSIONS), window.name
        return
    stats = {q["Id"]: q["MetricStat"] for q in props["Metrics"] if "MetricStat" in q}
    assert {
        k: (s["Metric"]["MetricName"], s["Stat"], s["Period"], s["Metric"]["Dimensions"]) for k, s in stats.items()
    } == {
        "errors": (objective.metric, "Sum", window.period_seconds, DIMENSIONS),
        "requests": (objective.divided_by, "Sum", window.period_seconds, DIMENSIONS),
    }, window.name
    (returned,) = [q for q in props["Metrics"] if q.get("ReturnData", True)]
    assert returned["Expression"] == "IF(requests > 0, 100 * FILL(errors, 0) / requests, 0)", window.name


def check_composite(alarm: BurnRateAlarm, resource: dict[str, Any], window_ids: dict[str, str]) -> None:
    props = resource["Properties"]
    rule = " ".join(props["AlarmRule"]["Fn::Sub"].split())
    assert rule == f'ALARM("{SLO_PREFIX}{alarm.long.name}{SUFFIX}") AND ALARM("{SLO_PREFIX}{alarm.short.name}{SUFFIX}")'
    assert props["AlarmActions"] == [TOPIC[alarm.tier.action]], alarm.name
    assert props.get("OKActions") == ([TOPIC["page"]] if alarm.tier.action == "page" else None), alarm.name
    # CloudFormation must create the window alarms first: the rule names them in a string, not with !Ref.
    assert sorted(resource["DependsOn"]) == sorted(window_ids[w.name] for w in (alarm.long, alarm.short))


def check_template(template: dict[str, Any], playbook: Playbook) -> None:
    expected = burn_rate_alarms(playbook.slo)
    windows = _slo_resources(template, "AWS::CloudWatch::Alarm")
    composites = _slo_resources(template, "AWS::CloudWatch::CompositeAlarm")
    assert sorted(windows) == sorted(w.name for a in expected for w in (a.long, a.short))
    assert sorted(composites) == sorted(a.name for a in expected)
    window_ids = {
        part: logical_id
        for logical_id, res in resources_of_type(template, "AWS::CloudWatch::Alarm").items()
        for part, other in windows.items()
        if other is res
    }
    for alarm in expected:
        for window in (alarm.long, alarm.short):
            check_window(window, windows[window.name]["Properties"])
        check_composite(alarm, composites[alarm.name], window_ids)


def test_the_template_declares_the_burn_rate_alarms_the_slo_calls_for(playbook: Playbook) -> None:
    check_template(VARIANT, playbook)
    # Two tiers of three objectives, each a composite of two windows, per variant.
    assert len(burn_rate_alarms(playbook.slo)) == 6


@pytest.mark.parametrize(
    ("alarm", "key", "value"),
    [
        ("AvailabilitySlowBurn6hAlarm", "Threshold", 0.5),  # not 6 x 0.1 %
        ("TtftFastBurn5mAlarm", "ExtendedStatistic", "PR(:600)"),  # another latency objective
        ("LatencySlowBurn30mAlarm", "Period", 3600),  # another window
        ("AvailabilityFastBurnAlarm", "AlarmActions", [{"Ref": "NotifyTopicArn"}]),  # fast burn must page
    ],
)
def test_the_check_catches_a_drifted_alarm(playbook: Playbook, alarm: str, key: str, value: Any) -> None:
    drifted = copy.deepcopy(VARIANT)
    drifted["Resources"][alarm]["Properties"][key] = value
    with pytest.raises(AssertionError):
        check_template(drifted, playbook)


def test_the_check_catches_a_missing_window(playbook: Playbook) -> None:
    drifted = copy.deepcopy(VARIANT)
    del drifted["Resources"]["TtftSlowBurn30mAlarm"]
    with pytest.raises(AssertionError):
        check_template(drifted, playbook)


def test_both_variants_page_and_notify_through_the_stack_s_topics() -> None:
    for nested in ("PrimaryVariantRemediation", "CanaryVariantRemediation"):
        given = MAIN["Resources"][nested]["Properties"]["Parameters"]
        assert given["SloAlarmNamePrefix"] == {"Fn::Sub": "${AWS::StackName}-slo-"}
        assert (given["PageTopicArn"], given["NotifyTopicArn"]) == ({"Ref": "PagingTopic"}, {"Ref": "OperationsTopic"})
    # Not the responder's prefix: its rule would route the composites to it, and it acts on metric alarms only.
    assert not "${AWS::StackName}-slo-".startswith("${AWS::StackName}-remediation-")
    paging = MAIN["Resources"]["PagingTopic"]["Properties"]
    assert paging["KmsMasterKeyId"] == {"Ref": "OperationsKey"}  # a key CloudWatch alarm actions may use
