"""CloudWatch Logs' embedded metric format (EMF) extraction, added to moto 5.2.5 by this project.

On AWS, CloudWatch Logs turns every log event whose message is an EMF record into metric datapoints
(the ``x-amzn-logs-format: json/emf`` header is optional). moto stores the event and nothing more.
Here, after moto's ``PutLogEvents`` has stored the events it accepted, each EMF message becomes datapoints
in moto's CloudWatch backend, as the EMF specification says:

- the namespace of each directive in ``_aws.CloudWatchMetrics``; every ``Dimensions`` array is one dimension
  set, its values read from the record's top-level members;
- each metric's value from the member of its name: a number, or an array of numbers of which every value is
  one sample (so percentiles are computed over them); the declared ``Unit`` (``None`` when absent);
- the timestamp from ``_aws.Timestamp`` (milliseconds since the epoch).

A record that breaks the specification (not a JSON object, a missing or mistyped member, an unknown unit,
more than 100 values or metrics, a dimension value that is not a string) yields no metric at all and is
logged; the log event itself is kept and the caller gets no error, as with CloudWatch Logs. Not emulated:
the ``AWS/Logs`` ``EMFValidationErrors``/``EMFParsingErrors`` metrics, and CloudWatch's ingestion delay.
Tests that rely on it say so.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import botocore.session
from aws_embedded_metrics import constants as emf_limits
from moto.cloudwatch.models import cloudwatch_backends
from moto.logs.models import LogStream
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

logger = logging.getLogger(__name__)

_CLOUDWATCH = botocore.session.get_session().get_service_model("cloudwatch")
#: Units as the CloudWatch API model lists them (``StandardUnit``).
STANDARD_UNITS: frozenset[str] = frozenset(_CLOUDWATCH.shape_for("StandardUnit").enum)  # type: ignore[attr-defined]


class InvalidEmfError(ValueError):
    """The message claims to be EMF (it has ``_aws.CloudWatchMetrics``) but breaks the specification."""


class _Strict(BaseModel):
    # Unknown members are ignored, as the specification asks; known ones must have the declared JSON type.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class _MetricDefinition(_Strict):
    Name: str = Field(min_length=1, max_length=emf_limits.MAX_METRIC_NAME_LENGTH)
    Unit: str | None = None
    StorageResolution: int = 60

    @field_validator("Unit")
    @classmethod
    def _known_unit(cls, unit: str | None) -> str | None:
        if unit is not None and unit not in STANDARD_UNITS:
            raise ValueError(f"unknown unit {unit!r}")
        return unit

    @field_validator("StorageResolution")
    @classmethod
    def _resolution(cls, value: int) -> int:
        if value not in (1, 60):
            raise ValueError(f"StorageResolution must be 1 or 60, got {value}")
        return value


class _MetricDirective(_Strict):
    Namespace: str = Field(min_length=1, max_length=emf_limits.MAX_NAMESPACE_LENGTH)
    Dimensions: list[list[str]]
    Metrics: list[_MetricDefinition] = Field(max_length=emf_limits.MAX_METRICS_PER_EVENT)

    @field_validator("Dimensions")
    @classmethod
    def _set_size(cls, sets: list[list[str]]) -> list[list[str]]:
        for keys in sets:
            if len(keys) > emf_limits.MAX_DIMENSION_SET_SIZE:
                raise ValueError(f"a dimension set has {len(keys)} keys (at most {emf_limits.MAX_DIMENSION_SET_SIZE})")
        return sets


class _Metadata(_Strict):
    Timestamp: float = Field(ge=0)  # milliseconds since the epoch
    CloudWatchMetrics: list[_MetricDirective]


@dataclass(frozen=True)
class EmfDatum:
    """One metric of one dimension set of an EMF record: what ``PutMetricData`` would carry."""

    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...]
    values: tuple[float, ...]
    unit: str | None
    timestamp: datetime  # timezone-aware UTC


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _values(record: dict[str, Any], name: str) -> tuple[float, ...]:
    if name not in record:
        raise InvalidEmfError(f"metric {name!r} has no member in the record")
    value = record[name]
    values = value if isinstance(value, list) else [value]
    if not values or len(values) > emf_limits.MAX_DATAPOINTS_PER_METRIC:
        raise InvalidEmfError(f"metric {name!r} has {len(values)} values (1 to 100)")
    if not all(_is_number(item) for item in values):
        raise InvalidEmfError(f"metric {name!r} has a value that is not a finite number: {value!r}")
    return tuple(float(item) for item in values)


def _dimension(record: dict[str, Any], key: str) -> tuple[str, str]:
    value = record.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= emf_limits.MAX_DIMENSION_VALUE_LENGTH:
        raise InvalidEmfError(f"dimension {key!r} needs a string member of 1 to 1024 characters, got {value!r}")
    return key, value


def parse_emf(message: str) -> list[EmfDatum]:
    """The datapoints CloudWatch Logs extracts from one log message.

    Returns
    -------
    list[EmfDatum]
        One entry per (directive, dimension set, metric); empty when the message is not EMF at all.

    Raises
    ------
    InvalidEmfError
        When the message is an EMF record that breaks the specification (CloudWatch extracts nothing from it).

    Examples
    --------
    >>> line = '{"_aws": {"Timestamp": 0, "CloudWatchMetrics": [{"Namespace": "N", "Dimensions": [["A"]], '
    >>> line += '"Metrics": [{"Name": "M", "Unit": "Count"}]}]}, "A": "a", "M": [1, 2]}'
    >>> [(d.name, d.dimensions, d.values, d.unit) for d in parse_emf(line)]
    [('M', (('A', 'a'),), (1.0, 2.0), 'Count')]
    """
    try:
        record = json.loads(message)
    except ValueError:
        return []  # a plain log line
    metadata_member = record.get("_aws") if isinstance(record, dict) else None
    if not isinstance(metadata_member, dict) or "CloudWatchMetrics" not in metadata_member:
        return []  # JSON, but not EMF
    try:
        metadata = _Metadata.model_validate(metadata_member)
    except ValidationError as exc:
        raise InvalidEmfError(f"invalid _aws metadata: {exc.errors(include_url=False)}") from exc
    timestamp = datetime.fromtimestamp(metadata.Timestamp / 1000, UTC)
    data: list[EmfDatum] = []
    for directive in metadata.CloudWatchMetrics:
        dimension_sets = [tuple(_dimension(record, key) for key in keys) for keys in directive.Dimensions]
        for metric in directive.Metrics:
            values = _values(record, metric.Name)
            data.extend(
                EmfDatum(directive.Namespace, metric.Name, dims, values, metric.Unit, timestamp)
                for dims in dimension_sets
            )
    return data


def publish(data: list[EmfDatum], account_id: str, region: str) -> None:
    """Store datapoints in moto's CloudWatch backend through its own ``put_metric_data``."""
    backend = cloudwatch_backends[account_id][region]
    for datum in data:
        backend.put_metric_data(
            datum.namespace,
            [
                {
                    "MetricName": datum.name,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in datum.dimensions],
                    "Values": list(datum.values),
                    "Unit": datum.unit or "None",
                    # moto keeps naive UTC datetimes and compares query bounds with them.
                    "Timestamp": datum.timestamp.replace(tzinfo=None),
                }
            ],
        )


def install() -> None:
    """Patch moto's log streams in this process (idempotent)."""
    if getattr(LogStream, "_fleet_patched", False):
        return
    original = LogStream.put_log_events

    def put_log_events(self: LogStream, log_events: list[dict[str, Any]]) -> str:
        token = original(self, log_events)  # only the events moto accepted (not too old, not too new) get here
        for event in log_events:
            try:
                data = parse_emf(event["message"])
            except InvalidEmfError as exc:
                logger.warning(
                    "EMF record in %s/%s ignored, as CloudWatch Logs would: %s",
                    self.log_group.name,
                    self.log_stream_name,
                    exc,
                )
                continue
            publish(data, self.account_id, self.region)
        return token

    LogStream.put_log_events = put_log_events  # type: ignore[method-assign]
    LogStream._fleet_patched = True  # type: ignore[attr-defined]
