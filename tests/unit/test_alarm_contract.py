"""Every alarm in the templates uses a metric name from the shared contract (``fleetops.metrics``).

Alarms on the project's namespace must name a ``MetricName`` member and only ``Dimension`` members; alarms
on AWS service metrics (``AWS/Lambda``, ``AWS/SQS``, ...) are AWS's names, not ours, and are only checked to
be in an ``AWS/`` namespace. The dashboard's SEARCH expressions are held to the same contract. A rename on
either side fails here.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from fleetops.metrics import NAMESPACE, Dimension, MetricName
from tests.unit.cfn_yaml import TEMPLATES, load, resources_of_type

CONTRACT = {m.value for m in MetricName}
DIMENSIONS = {d.value for d in Dimension}


def _alarm_metrics(props: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(namespace, metric name, dimension names) of a single-metric or a metric-math alarm."""
    if "MetricName" in props:
        return [(props.get("Namespace", ""), props["MetricName"], [d["Name"] for d in props.get("Dimensions", [])])]
    found = []
    for query in props.get("Metrics", []):
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            found.append((metric["Namespace"], metric["MetricName"], [d["Name"] for d in metric.get("Dimensions", [])]))
    return found


def all_alarms() -> list[tuple[str, dict[str, Any]]]:
    alarms = []
    for path in TEMPLATES:
        for name, res in resources_of_type(load(path), "AWS::CloudWatch::Alarm").items():
            alarms.append((f"{path.name}:{name}", res["Properties"]))
    return alarms


ALARMS = all_alarms()


def test_there_are_alarms_to_check() -> None:
    # The remediation kinds (8) live in templates/variant_remediation.yaml; without them this test proves nothing.
    own = [a for a, props in ALARMS if any(ns == NAMESPACE for ns, _, _ in _alarm_metrics(props))]
    assert len(own) >= 8, own


@pytest.mark.parametrize(("alarm", "props"), ALARMS, ids=[a for a, _ in ALARMS])
def test_alarm_uses_contract_names(alarm: str, props: dict[str, Any]) -> None:
    metrics = _alarm_metrics(props)
    assert metrics, f"{alarm}: no metric found (neither MetricName nor Metrics[].MetricStat)"
    for namespace, name, dims in metrics:
        if isinstance(namespace, str) and namespace.startswith("AWS/"):
            continue  # an AWS service metric: AWS names it
        assert namespace == NAMESPACE, f"{alarm}: namespace {namespace!r} is neither {NAMESPACE!r} nor AWS/*"
        assert name in CONTRACT, f"{alarm}: metric {name!r} is not in fleetops.metrics.MetricName"
        assert set(dims) <= DIMENSIONS, f"{alarm}: dimensions {dims} not in fleetops.metrics.Dimension"


def test_dashboard_searches_use_contract_names() -> None:
    dashboards = resources_of_type(load(TEMPLATES[0]), "AWS::CloudWatch::Dashboard")
    assert dashboards, "template.yaml has no dashboard"
    for name, res in dashboards.items():
        body = res["Properties"]["DashboardBody"]
        text = body["Fn::Sub"] if isinstance(body, dict) else body
        json.loads(re.sub(r"\$\{[^}]+\}", "x", text))  # valid JSON once !Sub has filled the variables
        searched = set(re.findall(r'MetricName=\\"([A-Za-z0-9]+)\\"', text))
        assert searched, f"{name}: no SEARCH expressions found"
        assert searched <= CONTRACT, f"{name}: {sorted(searched - CONTRACT)} not in fleetops.metrics.MetricName"


def test_the_checker_catches_a_name_outside_the_contract() -> None:
    # The check above must be able to fail: a typo'd metric is rejected.
    props = {"Namespace": NAMESPACE, "MetricName": "QueueDepthh", "Dimensions": [{"Name": "EndpointName"}]}
    with pytest.raises(AssertionError, match=r"'QueueDepthh' is not in fleetops\.metrics\.MetricName"):
        test_alarm_uses_contract_names("typo", props)
