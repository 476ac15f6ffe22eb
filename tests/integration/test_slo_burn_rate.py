"""The SLO burn-rate and GPU alarms of the templates, evaluated on the emulator by the project's alarm evaluator.

The alarms are created from ``templates/variant_remediation.yaml`` as written (:func:`devtools.alarms.create_alarms`),
the datapoints are what the gateway publishes (``Requests``, ``RequestErrors``, ``GpuHealthy``), and the evaluator
(``devtools/alarm_evaluator.py``, composite rules in ``devtools/alarm_rules.py``) decides the states and publishes
the alarm actions to the stack's topics. Six hours of traffic are put as history, one datapoint per minute with
timestamps in the last seconds (time runs 720 times faster: a minute is 83 ms), and the evaluator's pass runs at one
evaluation instant, so the result does not depend on how busy the machine is.
"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from devtools import emulator_extensions
from devtools.alarm_evaluator import AlarmEvaluator
from devtools.alarms import create_alarms
from devtools.aws_resources import create_inbox, read_inbox
from fleetops.metrics import NAMESPACE, MetricName

STACK = "manga-llm-fleet-prod"
ENDPOINT = "manga-chat-prod"
PARAMETERS = {"RemediatedEndpointName": ENDPOINT}
SCALE = 720.0
SIX_HOURS = 360  # minutes of history


@pytest.fixture(autouse=True)
def _extensions() -> None:
    emulator_extensions.install()


def _name(kind: str, variant: str, prefix: str = "slo") -> str:
    return f"{STACK}-{prefix}-{kind}-{ENDPOINT}-{variant}"


def _put(points: list[tuple[MetricName, str, float, float]]) -> None:
    """(metric, variant, value, epoch seconds) datapoints, as the gateway's EMF becomes metrics."""
    data: list[dict[str, Any]] = [
        {
            "MetricName": str(metric),
            "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "VariantName", "Value": variant}],
            "Value": value,
            "Timestamp": datetime.fromtimestamp(at, UTC),
        }
        for metric, variant, value, at in points
    ]
    cloudwatch = boto3.client("cloudwatch")
    for i in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=data[i : i + 500])  # type: ignore[arg-type]


def _alarm_messages(inbox: str) -> list[dict[str, Any]]:
    return [json.loads(envelope["Message"]) for envelope in read_inbox(inbox, wait_s=2)]


def test_a_sustained_one_percent_error_rate_notifies_through_the_slow_burn_and_a_failed_gpu_check_alarms() -> None:
    topics = {name: boto3.client("sns").create_topic(Name=f"{STACK}-{name}")["TopicArn"] for name in ("ops", "pager")}
    inboxes = {name: create_inbox(arn, f"{name}-inbox") for name, arn in topics.items()}
    names = create_alarms(STACK, PARAMETERS, {"OperationsTopic": topics["ops"], "PagingTopic": topics["pager"]})
    evaluator = AlarmEvaluator(time_scale=SCALE)  # driven pass by pass here, its thread is not started
    minute = evaluator.scaled(60)
    instant = math.floor(time.time() / minute) * minute  # an evaluation instant, just passed
    points: list[tuple[MetricName, str, float, float]] = []
    for k in range(SIX_HOURS):
        at = instant - (k + 0.5) * minute
        # primary: 1 % of 1000 requests a minute fail, for six hours; canary: the same 1 %, for the last 20 minutes only
        points += [(MetricName.REQUESTS, "primary", 1000.0, at), (MetricName.REQUEST_ERRORS, "primary", 10.0, at)]
        points += [(MetricName.REQUESTS, "canary", 1000.0, at)]
        points += [(MetricName.REQUEST_ERRORS, "canary", 10.0 if k < 20 else 0.0, at)]
    points.append((MetricName.GPU_HEALTHY, "primary", 1.0, instant - 0.7 * minute))
    points.append((MetricName.GPU_HEALTHY, "primary", 0.0, instant - 0.3 * minute))  # one failed check this minute
    points.append((MetricName.GPU_HEALTHY, "canary", 1.0, instant - 0.3 * minute))
    _put(points)

    evaluator.evaluate_due(now=instant + evaluator.settle_s + 1e-3)
    states = {
        a["AlarmName"]: a["StateValue"]
        for kind in ("MetricAlarms", "CompositeAlarms")
        for a in boto3.client("cloudwatch").describe_alarms(AlarmNames=names)[kind]
    }

    # 1 % is 10x the 0.1 % budget: over the slow tier's 6x (0.6 %) in both windows, under the fast tier's 14.4x.
    for window in ("availability-slow-burn-6h", "availability-slow-burn-30m", "availability-slow-burn"):
        assert states[_name(window, "primary")] == "ALARM", window
    for window in ("availability-fast-burn-1h", "availability-fast-burn-5m", "availability-fast-burn"):
        assert states[_name(window, "primary")] == "OK", window
    # ... and the per-minute error-rate alarm (5 % in 3 of 5 minutes) never sees it.
    assert states[_name("error-rate", "primary", "remediation")] == "OK"
    # Both windows must burn: the canary's 20 minutes fill the 30-minute window but not six hours.
    assert states[_name("availability-slow-burn-30m", "canary")] == "ALARM"
    assert states[_name("availability-slow-burn-6h", "canary")] == "OK"
    assert states[_name("availability-slow-burn", "canary")] == "OK"
    # One GpuHealthy 0 among the minute's checks.
    assert states[_name("gpu-unhealthy", "primary", "remediation")] == "ALARM"
    assert states[_name("gpu-unhealthy", "canary", "remediation")] == "OK"

    slow = next(t for t in evaluator.transitions if t.alarm_name == _name("availability-slow-burn", "primary"))
    assert (slow.previous, slow.state) == ("INSUFFICIENT_DATA", "ALARM")
    assert "is TRUE" in slow.reason and slow.instant == pytest.approx(instant)
    six_hours = next(t for t in evaluator.transitions if t.alarm_name == _name("availability-slow-burn-6h", "primary"))
    assert six_hours.reason_data["recentDatapoints"] == [1.0]  # 3600 errors of 360000 requests

    # The slow burn notifies the operations topic; the pager gets no ALARM (its OK messages resolve nothing open).
    notified = [m for m in _alarm_messages(inboxes["ops"]) if m["NewStateValue"] == "ALARM"]
    assert [m["AlarmName"] for m in notified] == [_name("availability-slow-burn", "primary")]
    assert notified[0]["OldStateValue"] == "INSUFFICIENT_DATA" and "is TRUE" in notified[0]["NewStateReason"]
    paged = _alarm_messages(inboxes["pager"])
    assert paged and all(m["NewStateValue"] == "OK" for m in paged)
    assert {m["AlarmName"] for m in paged} == {
        _name(f"{objective}-fast-burn", variant)
        for objective in ("availability", "ttft", "latency")
        for variant in ("primary", "canary")
    }
