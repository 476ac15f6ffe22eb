"""The emulated alarm evaluation's pure parts (``devtools.alarm_evaluator``): metric math, and datapoints -> state.

Metric math is CloudWatch's arithmetic over time series aligned on the alarm's periods: a missing datapoint in
an operand makes the result missing there, ``FILL`` fills it, ``IF`` picks per period. The expressions of
``templates/variant_remediation.yaml`` are evaluated as written there.
"""

from __future__ import annotations

import doctest

import pytest

from devtools import alarm_evaluator
from devtools.alarm_evaluator import MetricMathError, evaluate_expression
from devtools.alarm_state import alarm_state
from tests.conftest import REPO
from tests.unit.cfn_yaml import load, resources_of_type

VARIANT_TEMPLATE = REPO / "templates" / "variant_remediation.yaml"


def _template_expression(alarm: str) -> str:
    """The returned expression of one of the template's metric-math alarms, as written in the YAML."""
    props = resources_of_type(load(VARIANT_TEMPLATE), "AWS::CloudWatch::Alarm")[alarm]["Properties"]
    (query,) = [m for m in props["Metrics"] if m.get("ReturnData", True)]
    expression = query["Expression"]
    return expression if isinstance(expression, str) else str(expression["Fn::Sub"]).replace("${MaxNumSeqs}", "64")


def test_the_error_rate_expression_of_the_template() -> None:
    expression = _template_expression("ErrorRateAlarm")
    requests = [100.0, 50.0, 0.0, None, 20.0]
    errors = [10.0, None, 0.0, 3.0, 1.0]  # None: the gateway emitted no RequestErrors that minute
    rate = evaluate_expression(expression, {"requests": requests, "errors": errors}, 5)
    # 10 %; missing errors filled with 0; no traffic is 0 %, not a division by zero; no requests datapoint: missing.
    assert rate == [10.0, 0.0, 0.0, None, 5.0]


def test_the_saturation_expression_of_the_template() -> None:
    expression = _template_expression("SaturationAlarm")
    assert expression == "100 * running / 64"
    assert evaluate_expression(expression, {"running": [60.0, None, 32.0]}, 3) == [93.75, None, 50.0]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("a + b * 2", [7.0, None]),
        ("(a + b) * 2", [8.0, None]),
        ("a ^ 2", [1.0, 4.0]),  # ^ is CloudWatch's power operator
        ("-a", [-1.0, -2.0]),
        ("a / 0", [None, None]),  # undefined arithmetic gives no datapoint
        ("a >= 2", [0.0, 1.0]),
        ("a != b", [1.0, None]),
        ("IF(a > 1, 10, 20)", [20.0, 10.0]),
        ("IF(b > 0, a)", [1.0, None]),  # IF without an else: missing where the condition is false or missing
        ("FILL(b, 7)", [3.0, 7.0]),
        ("FILL(b, -1) + a", [4.0, 1.0]),
        ("42", [42.0, 42.0]),
    ],
)
def test_operators_and_functions(expression: str, expected: list[float | None]) -> None:
    assert evaluate_expression(expression, {"a": [1.0, 2.0], "b": [3.0, None]}, 2) == expected


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("MAX([a, b])", "not supported"),
        ("METRICS()", "function METRICS is not supported"),
        ("SEARCH('{AWS/EC2} CPU', 'Average', 300)", "not supported"),
        ("FILL(a, REPEAT)", "unknown id 'REPEAT'"),
        ("a.b", "Attribute is not supported"),
        ("__import__('os')", "function __import__ is not supported"),
        ("a if b else 1", "IfExp is not supported"),
        ("1 < a < 3", "chained comparisons"),
        ("a +", "does not parse"),
        ("c * 2", "unknown id 'c'"),
        ("'text'", "only numbers"),
    ],
)
def test_anything_else_is_refused_loudly(expression: str, says: str) -> None:
    with pytest.raises(MetricMathError, match=says):
        evaluate_expression(expression, {"a": [1.0], "b": [2.0]}, 1)


# --- datapoints -> state: M of N and TreatMissingData (values oldest first, None = no datapoint) ---


def _state(values: list[float | None], treat: str, m: int = 3) -> str | None:
    return alarm_state(
        values, comparison="GreaterThanThreshold", threshold=500, datapoints_to_alarm=m, treat_missing=treat
    ).state


def test_m_of_n_needs_m_breaching_datapoints() -> None:
    assert _state([600, 700, 100, 100, 100], "notBreaching") == "OK"
    assert _state([600, 100, 700, 100, 800], "notBreaching") == "ALARM"  # 3 of 5, not consecutive
    assert _state([600, 700, None, None, 800], "notBreaching") == "ALARM"


@pytest.mark.parametrize(
    ("treat", "none_at_all", "two_breaching_three_missing"),
    [
        ("missing", "INSUFFICIENT_DATA", "OK"),
        ("ignore", None, "OK"),  # None: keep the current state
        ("breaching", "ALARM", "ALARM"),
        ("notBreaching", "OK", "OK"),
    ],
)
def test_treat_missing_data(treat: str, none_at_all: str | None, two_breaching_three_missing: str) -> None:
    assert _state([None] * 5, treat) == none_at_all
    assert _state([600, None, 700, None, None], treat) == two_breaching_three_missing


@pytest.mark.parametrize(
    ("comparison", "value", "breaching"),
    [
        ("GreaterThanThreshold", 500, False),
        ("GreaterThanOrEqualToThreshold", 500, True),
        ("LessThanThreshold", 499, True),
        ("LessThanOrEqualToThreshold", 501, False),
    ],
)
def test_comparison_operators(comparison: str, value: float, breaching: bool) -> None:
    verdict = alarm_state([value], comparison=comparison, threshold=500, datapoints_to_alarm=1)
    assert verdict.breaching == (breaching,)
    assert verdict.state == ("ALARM" if breaching else "OK")


def test_anomaly_detection_operators_are_refused() -> None:
    with pytest.raises(ValueError, match="not emulated"):
        alarm_state([1.0], comparison="LessThanLowerOrGreaterThanUpperThreshold", threshold=0, datapoints_to_alarm=1)


def test_docstring_examples() -> None:
    assert doctest.testmod(alarm_evaluator, optionflags=doctest.ELLIPSIS).failed == 0
