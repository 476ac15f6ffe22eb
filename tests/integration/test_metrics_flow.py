"""Metrics and alarms as on AWS, end to end on the emulator: the container's EMF lines shipped to CloudWatch Logs
become metrics, the template's alarms evaluate them, and their state changes reach the alarm responder Lambda
through the rule ``template.yaml`` declares.

The EMF lines are printed by the gateway's own code (:class:`gateway.metrics.EmfWriter`, :class:`MetricsAgent`),
and shipped with ``PutLogEvents`` as SageMaker ships a container's stdout. Emulated by this project, not by
moto: EMF extraction (``devtools/emulator_extensions/logs_emf.py``), percentiles in ``GetMetricData``
(``cloudwatch.py``), alarm evaluation (``devtools/alarm_evaluator.py``), EventBridge -> Lambda delivery
(``events_lambda.py``) and the real handler behind the Lambda (``devtools/lambda_dispatch.py``).
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from devtools import emulator_extensions
from devtools.alarm_evaluator import AlarmEvaluator
from devtools.alarms import create_alarms, remediation_flow, template_alarms
from devtools.emulator import MotoServer, free_port
from devtools.emulator_extensions.events_lambda import deliveries
from devtools.remediation_stack import RemediationStack, create_remediation_stack
from fleetops.aws.autoscaling import AutoScaling
from fleetops.metrics import NAMESPACE, MetricName
from fleetops.remediation.alarm import AlarmStateChangeEvent
from gateway.metrics import GPU_DIMENSION, EmfWriter, GatewayMetrics, MetricsAgent
from tests.conftest import REPO
from tests.integration.remediation.conftest import ENDPOINT, FLEET_YAML, STACK
from tests.unit.cfn_yaml import load, resources_of_type

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.type_defs import DimensionTypeDef, MetricDataQueryTypeDef

LOG_GROUP = f"/aws/sagemaker/Endpoints/{ENDPOINT}"
PARAMETERS = {"RemediatedEndpointName": ENDPOINT}  # the template names no endpoint by default
INSTANCE = "i-0a1b2c3d4e"
DIMS: list[DimensionTypeDef] = [
    {"Name": "EndpointName", "Value": ENDPOINT},
    {"Name": "VariantName", "Value": "primary"},
]
PREFIX = f"{STACK}-remediation-"


@pytest.fixture(autouse=True)
def _extensions() -> None:
    emulator_extensions.install()


@pytest.fixture
def stack(tmp_path: Path) -> RemediationStack:
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(FLEET_YAML)
    return create_remediation_stack(STACK, fleet_path, ENDPOINT, {"primary": (2, 2, 12), "canary": (1, 1, 2)})


@pytest.fixture(autouse=True)
def _log_streams(_fresh_emulator: MotoServer) -> None:
    """The endpoint's log group and one instance's stream per variant, as SageMaker creates them."""
    logs = boto3.client("logs")
    logs.create_log_group(logGroupName=LOG_GROUP)
    for variant in ("primary", "canary"):
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=f"{variant}/{INSTANCE}")


def ship(*texts: str, variant: str = "primary") -> None:
    """What SageMaker does with the container's stdout: one log event per line in ``<variant>/<instance>``."""
    now = int(time.time() * 1000)
    lines = [line for text in texts for line in text.splitlines() if line.strip()]
    boto3.client("logs").put_log_events(
        logGroupName=LOG_GROUP,
        logStreamName=f"{variant}/{INSTANCE}",
        logEvents=[{"timestamp": now, "message": line} for line in lines],
    )


def printed(metrics: dict[MetricName, Any], variant: str = "primary", extra: dict[str, str] | None = None) -> str:
    """What the gateway's EmfWriter prints for ``metrics`` (engine gauges, GPU readings)."""
    out = io.StringIO()
    asyncio.run(EmfWriter(out, ENDPOINT, variant).emit(metrics, extra))
    return out.getvalue()


def emit(metrics: dict[MetricName, Any], variant: str = "primary", extra: dict[str, str] | None = None) -> None:
    ship(printed(metrics, variant, extra), variant=variant)


def agent_interval(requests: int, errors: int, ttft_ms: list[float], variant: str = "primary") -> str:
    """What one interval of the gateway's MetricsAgent prints: its recorder's counters and TTFT observations.

    The engine is down (a closed port), as between restarts: the agent then writes the gateway's metrics only.
    """
    recorder, out = GatewayMetrics(), io.StringIO()
    recorder.increment(MetricName.REQUESTS, requests)
    recorder.increment(MetricName.REQUEST_ERRORS, errors)
    for value in ttft_ms:
        recorder.observe(MetricName.TIME_TO_FIRST_TOKEN, value)
    agent = MetricsAgent(recorder, f"http://127.0.0.1:{free_port()}", ENDPOINT, variant, out=out)
    asyncio.run(agent.flush_once())
    return out.getvalue()


def state_of(name: str) -> dict[str, Any]:
    (alarm,) = boto3.client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"]
    return dict(alarm)


# --- CloudWatch Logs -> metrics ---


def _metric_data(name: str, stat: str, dims: list[DimensionTypeDef] = DIMS) -> list[float]:
    now = datetime.now(UTC)
    query: MetricDataQueryTypeDef = {
        "Id": "q",
        "MetricStat": {
            "Metric": {"Namespace": NAMESPACE, "MetricName": name, "Dimensions": dims},
            "Period": 3600,
            "Stat": stat,
        },
    }
    answer = boto3.client("cloudwatch").get_metric_data(
        MetricDataQueries=[query],
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=1),
    )
    return list(answer["MetricDataResults"][0]["Values"])


def test_emf_lines_shipped_to_logs_become_metrics_with_their_dimensions_and_samples() -> None:
    emit({MetricName.QUEUE_DEPTH: 7.0, MetricName.TIME_TO_FIRST_TOKEN: [float(v) for v in range(1, 101)]})
    emit({MetricName.QUEUE_DEPTH: 9.0})
    emit({MetricName.GPU_UTILIZATION: 90.0}, extra={GPU_DIMENSION: "0"})
    emit({MetricName.GPU_UTILIZATION: 40.0}, extra={GPU_DIMENSION: "1"})

    assert _metric_data("QueueDepth", "Average") == [8.0]
    assert _metric_data("TimeToFirstTokenMs", "SampleCount") == [100.0]  # a value array is 100 samples
    assert _metric_data("TimeToFirstTokenMs", "p95") == [95.0]
    # Both dimension sets of a GPU record: per device, and the variant across its devices.
    assert _metric_data("GpuUtilization", "Maximum", [*DIMS, {"Name": "Gpu", "Value": "1"}]) == [40.0]
    assert _metric_data("GpuUtilization", "Average") == [65.0]

    now = datetime.now(UTC)
    stats = boto3.client("cloudwatch").get_metric_statistics(
        Namespace=NAMESPACE,
        MetricName="QueueDepth",
        Dimensions=DIMS,
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=1),
        Period=3600,
        Statistics=["Sum", "SampleCount", "Maximum"],
    )
    (point,) = stats["Datapoints"]
    assert (point["Sum"], point["SampleCount"], point["Maximum"], point["Unit"]) == (16.0, 2.0, 9.0, "Count")


def test_invalid_emf_is_kept_as_a_log_line_and_makes_no_metric() -> None:
    broken = json.loads(printed({MetricName.QUEUE_DEPTH: 7.0}))
    broken["QueueDepth"] = "seven"
    ship("\n".join(["INFO engine ready", json.dumps(broken), "{not json"]))  # PutLogEvents accepts all three

    assert boto3.client("cloudwatch").list_metrics(Namespace=NAMESPACE)["Metrics"] == []
    logged = boto3.client("logs").get_log_events(logGroupName=LOG_GROUP, logStreamName=f"primary/{INSTANCE}")
    assert len(logged["events"]) == 3


# --- the template's alarms ---


def _nested_alarms() -> dict[str, dict[str, Any]]:
    return resources_of_type(load(REPO / "templates" / "variant_remediation.yaml"), "AWS::CloudWatch::Alarm")


def _expected_alarm_names(props: dict[str, Any], variant: str) -> list[str]:
    """The names one nested alarm resource gets for ``variant``, read from its ``Fn::Sub`` in the YAML.

    A per-adapter alarm (``!Sub [name, {Adapter: !Select [i, ...]}]``) names the i-th adapter of the
    ``LatencyAlarmAdapters`` default; a slot with no adapter creates nothing (its condition is false).
    """
    sub = props["AlarmName"]["Fn::Sub"]
    template, variables = (sub, {}) if isinstance(sub, str) else sub
    name = template.replace("${AlarmNamePrefix}", PREFIX).replace("${SloAlarmNamePrefix}", f"{STACK}-slo-")
    name = name.replace("${EndpointName}", ENDPOINT)
    name = name.replace("${VariantName}", variant)
    if "Adapter" not in variables:
        return [name]
    default = load(REPO / "templates" / "variant_remediation.yaml")["Parameters"]["LatencyAlarmAdapters"]["Default"]
    adapters = [a for a in default.split(",") if a]
    slot = variables["Adapter"]["Fn::Select"][0]
    return [name.replace("${Adapter}", adapters[slot])] if slot < len(adapters) else []


def test_the_alarms_created_from_the_templates_are_those_the_yaml_declares() -> None:
    created = create_alarms(STACK, PARAMETERS)
    everything = boto3.client("cloudwatch").describe_alarms()
    described = {a["AlarmName"]: a for a in everything["MetricAlarms"]}
    composites = {a["AlarmName"] for a in everything["CompositeAlarms"]}  # the SLO burn-rate tiers
    assert sorted(created) == sorted([*described, *composites])
    assert len(composites) == 2 * 6 and all(f"{STACK}-slo-" in name for name in composites)

    expected = 0
    for variant in ("primary", "canary"):
        for logical_id, resource in _nested_alarms().items():
            props = resource["Properties"]
            for name in _expected_alarm_names(props, variant):
                expected += 1
                alarm = described[name]
                assert alarm["Threshold"] == float(props["Threshold"]), logical_id
                for key in ("EvaluationPeriods", "ComparisonOperator", "TreatMissingData", "Statistic", "Period"):
                    assert alarm.get(key) == props.get(key), (logical_id, key)
                assert alarm.get("ExtendedStatistic") == props.get("ExtendedStatistic"), logical_id
                assert alarm.get("DatapointsToAlarm") == props.get("DatapointsToAlarm"), logical_id
                assert [m["Id"] for m in alarm["Metrics"]] == [m["Id"] for m in props.get("Metrics", [])], logical_id
                if "Dimensions" in props:
                    dimensions = [
                        {"Name": "EndpointName", "Value": ENDPOINT},
                        {"Name": "VariantName", "Value": variant},
                    ]
                    if len(props["Dimensions"]) == 3:  # the per-adapter alarms: the adapter the name ends with
                        dimensions.append({"Name": "Adapter", "Value": name.rsplit(f"-{variant}-", 1)[1]})
                    assert alarm["Dimensions"] == dimensions, logical_id
    # primary and canary; AWS/Lambda and AWS/SQS alarms left out
    assert len(described) == expected

    expressions = {
        a["AlarmName"]: [m["Expression"] for m in a["Metrics"] if "Expression" in m] for a in described.values()
    }
    assert expressions[f"{PREFIX}saturation-{ENDPOINT}-primary"] == ["100 * running / 64"]  # MaxNumSeqs resolved
    assert expressions[f"{PREFIX}error-rate-{ENDPOINT}-canary"] == [
        _nested_alarms()["ErrorRateAlarm"]["Properties"]["Metrics"][2]["Expression"]
    ]


def test_the_stack_parameters_and_the_yaml_decide_the_emulated_alarms(tmp_path: Path) -> None:
    parameters = {**PARAMETERS, "MaxNumSeqs": "128", "CanaryVariantName": ""}
    wider = {a.name: a.request for a in template_alarms(STACK, parameters)}
    # no canary: CanaryVariantRemediation's condition is false
    assert len(wider) == sum(len(_expected_alarm_names(r["Properties"], "primary")) for r in _nested_alarms().values())
    assert all("-primary" in name and "-canary" not in name for name in wider)
    saturation = wider[f"{PREFIX}saturation-{ENDPOINT}-primary"]["Metrics"]
    assert [m["Expression"] for m in saturation if "Expression" in m] == ["100 * running / 128"]

    # A changed threshold in the YAML changes the emulated alarm: nothing is re-declared in Python.
    (tmp_path / "templates").mkdir()
    (tmp_path / "template.yaml").write_text((REPO / "template.yaml").read_text())
    nested = (REPO / "templates" / "variant_remediation.yaml").read_text()
    queue_depth = nested.index("  QueueDepthAlarm:\n")
    head, tail = nested[:queue_depth], nested[queue_depth:]
    assert "Threshold: 50\n" in tail.split("\n\n", 1)[0]  # the queue-depth alarm's own block
    (tmp_path / "templates" / "variant_remediation.yaml").write_text(
        head + tail.replace("Threshold: 50\n", "Threshold: 75\n", 1)
    )
    changed = {a.name: a.request for a in template_alarms(STACK, PARAMETERS, template=tmp_path / "template.yaml")}
    assert changed[f"{PREFIX}queue-depth-{ENDPOINT}-primary"]["Threshold"] == 75.0


# --- the evaluator ---


@pytest.fixture
def bus_inbox() -> str:
    """An SQS queue receiving every CloudWatch alarm state change from the default bus (moto's own delivery)."""
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="alarm-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events = boto3.client("events")
    events.put_rule(Name="all-alarm-events", EventPattern=json.dumps({"source": ["aws.cloudwatch"]}))
    events.put_targets(Rule="all-alarm-events", Targets=[{"Id": "inbox", "Arn": arn}])
    return str(url)


def _received(url: str) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs")
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


@pytest.fixture
def evaluator() -> Iterator[AlarmEvaluator]:
    with AlarmEvaluator(time_scale=60) as running:
        yield running


def test_treat_missing_data_and_the_initial_state(evaluator: AlarmEvaluator, bus_inbox: str) -> None:
    cloudwatch = boto3.client("cloudwatch")
    for treat in ("missing", "ignore", "breaching", "notBreaching"):
        cloudwatch.put_metric_alarm(
            AlarmName=f"silent-{treat}",
            Namespace=NAMESPACE,
            MetricName="QueueDepth",
            Dimensions=[{"Name": "EndpointName", "Value": "silent"}, {"Name": "VariantName", "Value": "primary"}],
            Statistic="Average",
            Period=60,
            EvaluationPeriods=2,
            Threshold=50,
            ComparisonOperator="GreaterThanThreshold",
            TreatMissingData=treat,
        )
    cloudwatch.set_alarm_state(AlarmName="silent-ignore", StateValue="ALARM", StateReason="set by the test")
    names = [f"silent-{t}" for t in ("missing", "ignore", "breaching", "notBreaching")]
    evaluator.wait_evaluated(names, after=time.time(), timeout_s=10)

    states = {name: state_of(name)["StateValue"] for name in names}
    assert states == {
        "silent-missing": "INSUFFICIENT_DATA",  # as created on AWS; moto's initial OK is corrected, no event
        "silent-ignore": "ALARM",  # ignore keeps the state
        "silent-breaching": "ALARM",
        "silent-notBreaching": "OK",
    }
    assert "treated as [Breaching]" in state_of("silent-breaching")["StateReason"]
    moved = {(t.alarm_name, t.previous, t.state) for t in evaluator.transitions}
    assert moved == {
        ("silent-breaching", "INSUFFICIENT_DATA", "ALARM"),
        ("silent-notBreaching", "INSUFFICIENT_DATA", "OK"),
    }

    # The events on the bus are those CloudWatch sends, and the responder's own parser accepts them.
    received = _received(bus_inbox)
    assert sorted(e["detail"]["alarmName"] for e in received) == ["silent-breaching", "silent-notBreaching"]
    for raw in received:
        event = AlarmStateChangeEvent.model_validate(raw)
        assert event.detail_type == "CloudWatch Alarm State Change" and event.source == "aws.cloudwatch"
        assert event.detail.previous_state is not None and event.detail.previous_state.value == "INSUFFICIENT_DATA"
        (metric,) = event.detail.configuration.metrics
        assert metric.metric_stat is not None and metric.metric_stat.metric.dimensions["EndpointName"] == "silent"
        assert raw["resources"] == [state_of(event.detail.alarm_name)["AlarmArn"]]


def test_metric_math_the_emulator_cannot_evaluate_is_refused_loudly(
    evaluator: AlarmEvaluator, caplog: pytest.LogCaptureFixture
) -> None:
    boto3.client("cloudwatch").put_metric_alarm(
        AlarmName="banded",
        Metrics=[
            {
                "Id": "m",
                "ReturnData": False,
                "MetricStat": {
                    "Metric": {"Namespace": NAMESPACE, "MetricName": "QueueDepth", "Dimensions": DIMS},
                    "Period": 60,
                    "Stat": "Average",
                },
            },
            {"Id": "band", "Expression": "ANOMALY_DETECTION_BAND(m, 2)", "ReturnData": True},
        ],
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanThreshold",
    )
    with pytest.raises(ValueError, match="function ANOMALY_DETECTION_BAND is not supported"):
        evaluator.wait_evaluated(["banded"], after=0.0, timeout_s=10)
    assert "ANOMALY_DETECTION_BAND" in evaluator.refused["banded"]
    assert any(r.levelname == "ERROR" and "banded" in r.getMessage() for r in caplog.records)


# --- the whole flow: EMF -> alarm -> EventBridge -> the responder Lambda ---


def test_a_queue_depth_breach_via_emf_raises_min_capacity_and_only_our_alarms_reach_the_responder(
    stack: RemediationStack,
) -> None:
    with remediation_flow(stack, STACK, parameters=PARAMETERS, time_scale=30) as flow:
        ours = flow.alarm("queue-depth", "primary")
        foreign = create_alarms("manga-llm-fleet-dev", PARAMETERS)  # another stack's alarms on the same metrics
        flow.evaluator.wait_evaluated(foreign, after=time.time())
        foreign_queue_depth = f"manga-llm-fleet-dev-remediation-queue-depth-{ENDPOINT}-primary"

        start = flow.evaluator.sleep_to_next_window(60)
        emit({MetricName.QUEUE_DEPTH: 180.0})  # 3.6x the threshold of 50
        flow.evaluator.sleep_to_next_window(60)
        emit({MetricName.QUEUE_DEPTH: 12.0})

        alarm = flow.evaluator.wait_for(ours, "ALARM", after=start, timeout_s=20)
        assert "1 out of the last 1 datapoints [180.0 (" in alarm.reason
        assert "was greater than the threshold (50.0)" in alarm.reason
        handled = flow.handled(ours, "ALARM")
        assert handled.status == "succeeded", handled.error
        assert handled.result["status"] == "handled"
        assert [(o["action"], o["outcome"]) for o in handled.result["outcomes"]] == [("scale_out", "applied")]
        assert AutoScaling().get_target(ENDPOINT, "primary").min_capacity == 6  # type: ignore[union-attr]  # +4

        recovered = flow.evaluator.wait_for(ours, "OK", after=alarm.instant + 1e-3, timeout_s=20)
        assert "[12.0 (" in recovered.reason and "was not greater than the threshold (50.0)" in recovered.reason
        assert flow.handled(ours, "OK").result["state"] == "OK"
        assert AutoScaling().get_target(ENDPOINT, "primary").min_capacity == 6  # type: ignore[union-attr]  # never down
        assert state_of(ours)["StateValue"] == "OK"

        # The other stack's alarm fired on the same datapoints, and the rule's pattern kept it from our responder.
        flow.evaluator.wait_for(foreign_queue_depth, "ALARM", after=start, timeout_s=20)
        deliveries.idle()
        assert not [d for d in deliveries.all() if d.alarm_name and not d.alarm_name.startswith(PREFIX)]


def test_m_of_n_and_both_metric_math_alarms_from_the_gateways_own_metrics(stack: RemediationStack) -> None:
    slow = [6.5 * i for i in range(1, 101)]  # p95 617.5 ms, over the 500 ms threshold
    fast = [100.0] * 20
    with remediation_flow(stack, STACK, parameters=PARAMETERS, time_scale=60) as flow:
        ttft, errors, saturation = (flow.alarm(k, "primary") for k in ("ttft-p95", "error-rate", "saturation"))
        windows = []
        for requests, failed, first_tokens, running in [
            (100, 10, slow, 60.0),  # 10 % errors, slow TTFT, 93.75 % of max_num_seqs
            (100, 10, slow, 60.0),
            (100, 0, fast, 60.0),
            (100, 10, slow, None),  # the third breaching minute for ttft-p95 and error-rate (3 of 5)
        ]:
            windows.append(flow.evaluator.sleep_to_next_window(60))
            gauges = printed({MetricName.RUNNING_REQUESTS: running}) if running is not None else ""
            ship(agent_interval(requests, failed, first_tokens), gauges)
        fourth_ends = windows[-1] + flow.evaluator.scaled(60)

        full = flow.evaluator.wait_for(saturation, "ALARM", after=windows[0], timeout_s=20)
        assert "3 out of the last 3 datapoints [93.75 (" in full.reason
        for name in (ttft, errors):
            fired = flow.evaluator.wait_for(name, "ALARM", after=windows[0], timeout_s=20)
            assert fired.instant >= fourth_ends - 1e-3, f"{name} fired after two breaching minutes: {fired.reason}"
            assert "3 out of the last 5 datapoints" in fired.reason and "minimum 3 datapoints" in fired.reason
        rate = flow.evaluator.wait_for(errors, "ALARM", after=windows[0]).reason_data["recentDatapoints"]
        assert rate[-4:] == [10.0, 10.0, 0.0, 10.0]  # IF/FILL over RequestErrors and Requests
        p95 = flow.evaluator.wait_for(ttft, "ALARM", after=windows[0]).reason_data["recentDatapoints"]
        assert p95[-4:] == [617.5, 617.5, 100.0, 617.5]

        for name in (ttft, errors, saturation):
            handled = flow.handled(name, "ALARM")
            assert handled.status == "succeeded" and handled.result["status"] == "handled", handled.error
        assert AutoScaling().get_target(ENDPOINT, "primary").min_capacity == 4  # type: ignore[union-attr]  # +2


# --- EventBridge -> Lambda, by itself ---


def test_eventbridge_invokes_lambda_targets_asynchronously_beside_moto_s_own_targets() -> None:
    from devtools.state_machines import create_functions, create_role

    arn = create_functions(["echo"], create_role("echo"))["echo"]
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="copies")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events = boto3.client("events")
    events.put_rule(Name="orders", EventPattern=json.dumps({"source": ["shop"]}))
    events.put_targets(
        Rule="orders",
        Targets=[
            {"Id": "fn", "Arn": arn},
            {"Id": "constant", "Arn": arn, "Input": '{"fixed": true}'},
            {"Id": "gone", "Arn": arn.replace(":echo", ":deleted")},
            {"Id": "copy", "Arn": queue_arn},
        ],
    )
    events.put_rule(Name="off", EventPattern=json.dumps({"source": ["shop"]}), State="DISABLED")
    events.put_targets(Rule="off", Targets=[{"Id": "fn", "Arn": arn}])
    deliveries.clear()

    at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
    events.put_events(Entries=[{"Source": "shop", "DetailType": "Order", "Detail": '{"n": 1}', "Time": at}])
    events.put_events(Entries=[{"Source": "other", "DetailType": "Order", "Detail": '{"n": 2}'}])
    deliveries.idle(timeout_s=10)

    by_target = {d.target_id: d for d in deliveries.all()}
    assert sorted(by_target) == ["constant", "fn", "gone"]  # the disabled rule and the other source: nothing
    # moto's Docker-free Lambda echoes its input: the function got the event as AWS delivers it.
    assert by_target["fn"].status == "succeeded"
    assert by_target["fn"].result == by_target["fn"].event
    assert by_target["fn"].event["time"] == "2026-11-21T19:02:00Z" and "ingestion-time" not in by_target["fn"].event
    assert by_target["fn"].event["detail"] == {"n": 1}
    assert by_target["constant"].result == {"fixed": True}
    assert by_target["gone"].status == "failed" and "deleted" in str(by_target["gone"].error)
    assert len(_received(url)) == 1  # moto's own SQS delivery still works beside them
