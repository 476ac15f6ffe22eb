"""EmfWriter output checked against the EMF specification (tests/unit/gateway_metrics/emf_spec.py)."""

from __future__ import annotations

import asyncio
import io
import json

import jsonschema  # type: ignore[import-untyped]
import pytest

from fleetops.metrics import NAMESPACE, UNITS, MetricName
from gateway.metrics import GPU_DIMENSION, EmfWriter

from .emf_spec import check_emf_line, check_emf_output, metric_names, units


def _emit(writer: EmfWriter, metrics: dict[MetricName, float | list[float]], **kwargs: dict[str, str]) -> None:
    asyncio.run(writer.emit(metrics, **kwargs))


def test_one_record_with_namespace_dimensions_units_and_values() -> None:
    out = io.StringIO()
    writer = EmfWriter(out, "manga-chat-prod", "primary")

    _emit(writer, {MetricName.QUEUE_DEPTH: 3.0, MetricName.TIME_TO_FIRST_TOKEN: [41.0, 95.5, 230.0]})

    [record] = check_emf_output(out.getvalue())
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == NAMESPACE
    assert directive["Dimensions"] == [["EndpointName", "VariantName"]]
    assert record["EndpointName"] == "manga-chat-prod"
    assert record["VariantName"] == "primary"
    assert units(record) == {"QueueDepth": "Count", "TimeToFirstTokenMs": "Milliseconds"}
    assert record["QueueDepth"] == 3.0
    assert record["TimeToFirstTokenMs"] == [41.0, 95.5, 230.0]
    # No dimensions from the library's environment defaults (LogGroup, ServiceName, ServiceType).
    assert "ServiceName" not in record
    assert "LogGroup" not in record


def test_units_come_from_the_metric_contract() -> None:
    out = io.StringIO()

    _emit(EmfWriter(out, "e", "v"), dict.fromkeys(UNITS, 1.0))

    records = check_emf_output(out.getvalue())
    declared: dict[str, str] = {}
    for record in records:
        declared.update(units(record))
    assert declared == {str(name): unit for name, unit in UNITS.items()}


def test_a_finer_dimension_set_is_added_next_to_the_endpoint_pair() -> None:
    out = io.StringIO()

    _emit(EmfWriter(out, "e", "v"), {MetricName.GPU_UTILIZATION: 87.0}, extra_dimensions={GPU_DIMENSION: "3"})

    [record] = check_emf_output(out.getvalue())
    assert record["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [
        ["EndpointName", "VariantName", "Gpu"],
        ["EndpointName", "VariantName"],
    ]
    assert record["Gpu"] == "3"


def test_more_than_100_values_are_split_across_valid_events() -> None:
    out = io.StringIO()
    values = [float(v) for v in range(250)]

    _emit(EmfWriter(out, "e", "v"), {MetricName.REQUEST_LATENCY: values, MetricName.REQUESTS: 250.0})

    records = check_emf_output(out.getvalue())
    assert len(records) == 3
    latencies = [v for r in records for v in r.get("RequestLatencyMs", [])]
    assert latencies == values
    # The counter is emitted once, not once per event (that would triple the Sum).
    assert sum("Requests" in metric_names(r) for r in records) == 1


def test_a_full_interval_is_written_a_record_at_a_time_with_the_loop_running_between() -> None:
    """At full load an interval holds thousands of values per metric; written at once they held the event loop
    (and every stream the gateway relays) for hundreds of ms. The loop runs between records."""
    out = io.StringIO()
    latencies = [float(v) for v in range(1000)]
    tokens = [float(v) for v in range(550)]

    async def emit_while_counting_turns() -> int:
        turns = 0

        async def other_work() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        worker = asyncio.ensure_future(other_work())
        await asyncio.sleep(0)
        before = turns
        await EmfWriter(out, "e", "v").emit(
            {MetricName.REQUEST_LATENCY: latencies, MetricName.TOKENS_OUT: tokens, MetricName.REQUESTS: 1000.0}
        )
        worker.cancel()
        return turns - before

    turns = asyncio.run(emit_while_counting_turns())

    records = check_emf_output(out.getvalue())
    assert len(records) == 10
    assert turns >= 9  # a turn between each two records
    assert [v for r in records for v in r.get("RequestLatencyMs", [])] == latencies
    assert [v for r in records for v in r.get("TokensOut", [])] == tokens
    assert sum("Requests" in metric_names(r) for r in records) == 1


def test_non_finite_values_are_dropped_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()

    _emit(EmfWriter(out, "e", "v"), {MetricName.REQUEST_LATENCY: [float("nan"), 12.0, float("inf")]})

    [record] = check_emf_output(out.getvalue())
    assert record["RequestLatencyMs"] == 12.0
    assert "non-finite" in caplog.text


def test_nothing_to_emit_writes_nothing() -> None:
    out = io.StringIO()

    _emit(EmfWriter(out, "e", "v"), {})

    assert out.getvalue() == ""


def test_empty_dimension_values_are_refused() -> None:
    with pytest.raises(ValueError, match="endpoint_name and variant_name must be non-empty"):
        EmfWriter(io.StringIO(), "", "primary")


def test_a_name_outside_the_contract_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a valid MetricName"):
        _emit(EmfWriter(io.StringIO(), "e", "v"), {"Latency": 1.0})  # type: ignore[dict-item]


def test_the_spec_checker_rejects_broken_records() -> None:
    # The checker itself must be able to fail, or the tests above prove nothing.
    good = {
        "_aws": {"Timestamp": 1, "CloudWatchMetrics": [{"Namespace": "n", "Dimensions": [["D"]], "Metrics": []}]},
        "D": "x",
    }
    check_emf_line(json.dumps(good))
    missing_dimension = {**good, "D": 5}
    bad_unit = json.loads(json.dumps(good))
    bad_unit["_aws"]["CloudWatchMetrics"][0]["Metrics"] = [{"Name": "M", "Unit": "Millis"}]
    bad_unit["M"] = 1
    too_many = json.loads(json.dumps(good))
    too_many["_aws"]["CloudWatchMetrics"][0]["Metrics"] = [{"Name": "M"}]
    too_many["M"] = list(range(101))
    for broken in (missing_dimension, bad_unit, too_many, {"M": 1}):
        with pytest.raises((AssertionError, jsonschema.ValidationError)):
            check_emf_line(json.dumps(broken))
