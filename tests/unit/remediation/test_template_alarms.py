"""The template's alarms mirror the playbook (thresholds, periods) and are wired to the responder."""

from __future__ import annotations

from typing import Any

import pytest

from fleetops.remediation.models import Playbook
from tests.conftest import REPO
from tests.unit.cfn_yaml import load, resources_of_type

VARIANT = load(REPO / "templates/variant_remediation.yaml")
MAIN = load(REPO / "template.yaml")


def _name(props: dict[str, Any]) -> str:
    """The alarm name's !Sub template (a per-adapter alarm: !Sub [<name>-${Adapter}, {Adapter: ...}])."""
    sub = props["AlarmName"]["Fn::Sub"]
    return str(sub[0] if isinstance(sub, list) else sub)


# The responder's alarms; the SLO burn-rate alarms (${SloAlarmNamePrefix}...) are tests/unit/test_slo_alarms.py's.
ALARMS = {
    logical_id: alarm
    for logical_id, alarm in resources_of_type(VARIANT, "AWS::CloudWatch::Alarm").items()
    if _name(alarm["Properties"]).startswith("${AlarmNamePrefix}")
}
PREFIX = {"Fn::Sub": "${AWS::StackName}-remediation-"}


def _kind(props: dict[str, Any]) -> str:
    name = props["AlarmName"]["Fn::Sub"]
    if isinstance(name, list):  # a per-adapter alarm: !Sub [<name>-${Adapter}, {Adapter: ...}]
        name = name[0].removesuffix("-${Adapter}")
    assert name.startswith("${AlarmNamePrefix}") and name.endswith("-${EndpointName}-${VariantName}"), name
    return str(name.removeprefix("${AlarmNamePrefix}").removesuffix("-${EndpointName}-${VariantName}"))


def _watched(props: dict[str, Any]) -> tuple[str, str, int]:
    if "MetricName" in props:
        stat = props.get("Statistic") or props["ExtendedStatistic"]
        return props["MetricName"], stat, props["Period"]
    stats = [q["MetricStat"] for q in props["Metrics"] if "MetricStat" in q]
    return stats[0]["Metric"]["MetricName"], stats[0]["Stat"], stats[0]["Period"]


def test_one_alarm_per_playbook_kind(playbook: Playbook) -> None:
    kinds = [_kind(a["Properties"]) for a in ALARMS.values()]
    assert set(kinds) == set(playbook.alarms)
    for kind, spec in playbook.alarms.items():  # per-adapter kinds have a slot per adapter, the others one alarm
        assert (kinds.count(kind) > 1) == spec.per_adapter, kind


@pytest.mark.parametrize("logical_id", sorted(ALARMS))
def test_alarm_mirrors_the_playbook(playbook: Playbook, logical_id: str) -> None:
    props = ALARMS[logical_id]["Properties"]
    spec = playbook.alarms[_kind(props)]
    metric, stat, period = _watched(props)
    assert (metric, stat, period) == (spec.metric, spec.statistic, spec.period_seconds)
    assert props["EvaluationPeriods"] == spec.evaluation_periods
    assert props.get("DatapointsToAlarm") == spec.datapoints_to_alarm
    assert float(props["Threshold"]) == spec.threshold
    assert props["ComparisonOperator"] == spec.comparison
    assert props["TreatMissingData"] == "notBreaching"
    if spec.divided_by is not None:
        names = [q["MetricStat"]["Metric"]["MetricName"] for q in props["Metrics"] if "MetricStat" in q]
        assert spec.divided_by in names
    if spec.per_max_num_seqs:
        expression = next(q["Expression"] for q in props["Metrics"] if "Expression" in q)
        assert "${MaxNumSeqs}" in expression["Fn::Sub"]


def test_dimensions_are_endpoint_and_variant(playbook: Playbook) -> None:
    for logical_id, alarm in ALARMS.items():
        props = alarm["Properties"]
        dims = props.get("Dimensions") or next(
            q["MetricStat"]["Metric"]["Dimensions"] for q in props["Metrics"] if "MetricStat" in q
        )
        assert dims[:2] == [
            {"Name": "EndpointName", "Value": {"Ref": "EndpointName"}},
            {"Name": "VariantName", "Value": {"Ref": "VariantName"}},
        ], logical_id
        if playbook.alarms[_kind(props)].per_adapter:  # the name's adapter is the dimension's
            (adapter,) = dims[2:]
            assert adapter["Name"] == "Adapter", logical_id
            assert adapter["Value"] == props["AlarmName"]["Fn::Sub"][1]["Adapter"], logical_id
        else:
            assert len(dims) == 2, logical_id


def test_the_rule_routes_exactly_the_responders_own_alarms() -> None:
    function = MAIN["Resources"]["AlarmResponderFunction"]["Properties"]
    assert function["Environment"]["Variables"]["ALARM_NAME_PREFIX"] == PREFIX
    rule = function["Events"]["OwnAlarmStateChange"]["Properties"]
    assert rule["Pattern"]["detail-type"] == ["CloudWatch Alarm State Change"]
    assert rule["Pattern"]["detail"]["alarmName"] == [{"prefix": PREFIX}]
    assert "DeadLetterConfig" in rule and function["DeadLetterQueue"]["Type"] == "SQS"
    for nested in ("PrimaryVariantRemediation", "CanaryVariantRemediation"):
        assert MAIN["Resources"][nested]["Properties"]["Parameters"]["AlarmNamePrefix"] == PREFIX
        assert MAIN["Resources"][nested]["Properties"]["Location"] == "templates/variant_remediation.yaml"


def test_target_tracking_has_a_steady_policy_and_a_fast_one_both_scaling_out_fast_and_in_slowly() -> None:
    policies = resources_of_type(VARIANT, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    configs = {
        p["Properties"]["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"][
            "PredefinedMetricType"
        ]: p["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        for p in policies
    }
    # One-minute invocations for the steady state; a high-resolution metric (10-second datapoints) for a backlog.
    assert set(configs) == {
        "SageMakerVariantInvocationsPerInstance",
        "SageMakerVariantConcurrentRequestsPerModelHighResolution",
    }
    assert all(config["ScaleOutCooldown"] == 60 for config in configs.values())
    assert all(config["ScaleInCooldown"] == {"Ref": "ScaleInCooldownSeconds"} for config in configs.values())
    cooldown = VARIANT["Parameters"]["ScaleInCooldownSeconds"]
    assert (cooldown["Default"], cooldown["MinValue"], cooldown["MaxValue"]) == (600, 300, 600)
    # The canary's capacity belongs to the rollout: no target tracking there.
    assert MAIN["Resources"]["CanaryVariantRemediation"]["Properties"]["Parameters"]["ManageTargetTracking"] == "false"


def test_idempotency_and_state_tables_use_the_shared_key_names() -> None:
    from fleetops.tables import IDEMPOTENCY_EXPIRES_AT, IDEMPOTENCY_PK, REMEDIATION_STATE_PK

    idem = MAIN["Resources"]["IdempotencyTable"]["Properties"]
    assert idem["KeySchema"] == [{"AttributeName": IDEMPOTENCY_PK, "KeyType": "HASH"}]
    assert idem["TimeToLiveSpecification"]["AttributeName"] == IDEMPOTENCY_EXPIRES_AT
    state = MAIN["Resources"]["RemediationStateTable"]["Properties"]
    assert state["KeySchema"] == [{"AttributeName": REMEDIATION_STATE_PK, "KeyType": "HASH"}]


def test_the_responder_starts_the_rollback_workflow_of_the_stack() -> None:
    function = MAIN["Resources"]["AlarmResponderFunction"]["Properties"]
    assert "RollbackStateMachine" in MAIN["Resources"]
    assert function["Environment"]["Variables"]["ROLLBACK_STATE_MACHINE_ARN"] == {"Ref": "RollbackStateMachine"}
    allowed = [p for p in function["Policies"] if isinstance(p, dict) and "StepFunctionsExecutionPolicy" in p]
    assert allowed == [
        {"StepFunctionsExecutionPolicy": {"StateMachineName": {"Fn::GetAtt": ["RollbackStateMachine", "Name"]}}}
    ]
