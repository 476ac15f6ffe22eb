"""EMF extraction as CloudWatch Logs does it (``devtools/emulator_extensions/logs_emf.py``), on the container's output.

The records are what the gateway's own :class:`gateway.metrics.EmfWriter` prints; the invalid ones break one
rule of the EMF specification each, and CloudWatch extracts nothing from them (the log event stays).
"""

from __future__ import annotations

import asyncio
import doctest
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devtools.emulator_extensions import logs_emf
from devtools.emulator_extensions.logs_emf import InvalidEmfError, parse_emf
from fleetops.metrics import NAMESPACE, MetricName
from gateway.metrics import GPU_DIMENSION, EmfWriter

ENDPOINT, VARIANT = "manga-chat-prod", "primary"
BASE = (("EndpointName", ENDPOINT), ("VariantName", VARIANT))


def _lines(metrics: dict[MetricName, Any], extra_dimensions: dict[str, str] | None = None) -> list[str]:
    out = io.StringIO()
    asyncio.run(EmfWriter(out, ENDPOINT, VARIANT).emit(metrics, extra_dimensions))
    return out.getvalue().splitlines()


def test_a_gateway_record_becomes_one_datum_per_metric_with_its_unit_and_timestamp() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    (line,) = _lines({MetricName.QUEUE_DEPTH: 7.0, MetricName.TIME_TO_FIRST_TOKEN: [120.0, 80.5, 300.0]})
    data = {d.name: d for d in parse_emf(line)}

    assert set(data) == {"QueueDepth", "TimeToFirstTokenMs"}
    queue, ttft = data["QueueDepth"], data["TimeToFirstTokenMs"]
    assert (queue.namespace, queue.dimensions, queue.values, queue.unit) == (NAMESPACE, BASE, (7.0,), "Count")
    # A value array is one sample per value, so CloudWatch computes percentiles over them.
    assert (ttft.values, ttft.unit) == ((120.0, 80.5, 300.0), "Milliseconds")
    assert queue.timestamp == datetime.fromtimestamp(json.loads(line)["_aws"]["Timestamp"] / 1000, UTC)
    # aws-embedded-metrics rounds to the nearest millisecond: up to 0.5 ms after now.
    assert before <= queue.timestamp <= datetime.now(UTC) + timedelta(milliseconds=1)


def test_every_dimension_set_gets_the_metric() -> None:
    (line,) = _lines({MetricName.GPU_UTILIZATION: 93.0}, extra_dimensions={GPU_DIMENSION: "1"})
    assert sorted(d.dimensions for d in parse_emf(line)) == sorted([BASE, (*BASE, ("Gpu", "1"))])


def test_a_busy_interval_spans_several_records_and_keeps_every_value() -> None:
    lines = _lines({MetricName.TIME_TO_FIRST_TOKEN: [float(v) for v in range(250)]})
    assert len(lines) == 3  # at most 100 values per metric per record
    values = [v for line in lines for d in parse_emf(line) for v in d.values]
    assert sorted(values) == [float(v) for v in range(250)]


@pytest.mark.parametrize("message", ["GET /ping 200", '{"level": "INFO", "message": "ready"}', '{"_aws": {}}', "[1]"])
def test_a_message_that_is_not_emf_is_just_a_log_line(message: str) -> None:
    assert parse_emf(message) == []


def _mutated(change: Any) -> str:
    (line,) = _lines({MetricName.QUEUE_DEPTH: 7.0, MetricName.TIME_TO_FIRST_TOKEN: [1.0, 2.0]})
    record = json.loads(line)
    change(record)
    return json.dumps(record)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda r: r["_aws"].pop("Timestamp"), "Timestamp"),
        (lambda r: r["_aws"].update(Timestamp="1795430738615"), "Timestamp"),
        (lambda r: r["_aws"]["CloudWatchMetrics"][0].pop("Namespace"), "Namespace"),
        (lambda r: r["_aws"]["CloudWatchMetrics"][0].pop("Dimensions"), "Dimensions"),
        (lambda r: r["_aws"]["CloudWatchMetrics"][0]["Metrics"][0].update(Unit="Requests"), "unknown unit"),
        (lambda r: r["_aws"]["CloudWatchMetrics"][0]["Metrics"][0].update(StorageResolution=30), "StorageResolution"),
        (lambda r: r["_aws"]["CloudWatchMetrics"][0]["Dimensions"].append([f"k{i}" for i in range(31)]), "31 keys"),
        (lambda r: r.pop("QueueDepth"), "no member"),
        (lambda r: r.update(QueueDepth="7"), "not a finite number"),
        (lambda r: r.update(QueueDepth=True), "not a finite number"),
        (lambda r: r.update(TimeToFirstTokenMs=[]), "0 values"),
        (lambda r: r.update(TimeToFirstTokenMs=[1.0] * 101), "101 values"),
        (lambda r: r.update(EndpointName=3), "dimension 'EndpointName'"),
        (lambda r: r.pop("VariantName"), "dimension 'VariantName'"),
    ],
)
def test_invalid_emf_yields_no_metric(change: Any, says: str) -> None:
    with pytest.raises(InvalidEmfError, match=says):
        parse_emf(_mutated(change))


def test_nan_is_not_a_number_here_either() -> None:
    (line,) = _lines({MetricName.QUEUE_DEPTH: 7.0})
    with pytest.raises(InvalidEmfError, match="not a finite number"):
        parse_emf(line.replace('"QueueDepth": 7.0', '"QueueDepth": NaN'))


def test_docstring_examples() -> None:
    assert doctest.testmod(logs_emf, optionflags=doctest.ELLIPSIS).failed == 0
