"""The CloudWatch embedded metric format (EMF) specification as a checker for test output.

Structure as a JSON schema (from the EMF specification in the CloudWatch user guide), units from
botocore's CloudWatch service model (``StandardUnit``), plus the rules a schema cannot express: every
referenced dimension is a string member of the root, every referenced metric a number or an array of at
most 100 numbers, at most 30 dimensions per set and 100 metrics per directive, 1 MB per event.
"""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import jsonschema  # type: ignore[import-untyped]

_CLOUDWATCH = botocore.session.get_session().get_service_model("cloudwatch")
STANDARD_UNITS: list[str] = list(_CLOUDWATCH.shape_for("StandardUnit").enum)  # type: ignore[attr-defined]

EMF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["_aws"],
    "properties": {
        "_aws": {
            "type": "object",
            "required": ["Timestamp", "CloudWatchMetrics"],
            "properties": {
                "Timestamp": {"type": "integer", "minimum": 0},
                "LogGroupName": {"type": "string", "minLength": 1},
                "CloudWatchMetrics": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["Namespace", "Dimensions", "Metrics"],
                        "properties": {
                            "Namespace": {"type": "string", "minLength": 1, "maxLength": 1024},
                            "Dimensions": {
                                "type": "array",
                                "items": {
                                    "type": "array",
                                    "minItems": 1,
                                    "maxItems": 30,
                                    "items": {"type": "string", "minLength": 1, "maxLength": 250},
                                },
                            },
                            "Metrics": {
                                "type": "array",
                                "maxItems": 100,
                                "items": {
                                    "type": "object",
                                    "required": ["Name"],
                                    "properties": {
                                        "Name": {"type": "string", "minLength": 1, "maxLength": 1024},
                                        "Unit": {"enum": STANDARD_UNITS},
                                        "StorageResolution": {"enum": [1, 60]},
                                    },
                                    "additionalProperties": False,
                                },
                            },
                        },
                        "additionalProperties": False,
                    },
                },
            },
        }
    },
}

MAX_EVENT_BYTES = 1_048_576
MAX_VALUES_PER_METRIC = 100


def check_emf_line(line: str) -> dict[str, Any]:
    """Parse one log line and assert it is a valid EMF event; return the parsed record."""
    assert len(line.encode()) <= MAX_EVENT_BYTES, "an EMF event must fit in 1 MB"
    record: dict[str, Any] = json.loads(line)
    jsonschema.validate(record, EMF_SCHEMA)
    for directive in record["_aws"]["CloudWatchMetrics"]:
        for dimension_set in directive["Dimensions"]:
            for key in dimension_set:
                assert isinstance(record.get(key), str), f"dimension {key} must be a string member of the root"
        for metric in directive["Metrics"]:
            value = record.get(metric["Name"])
            values = value if isinstance(value, list) else [value]
            assert values, f"metric {metric['Name']} has an empty value array"
            assert len(values) <= MAX_VALUES_PER_METRIC, f"metric {metric['Name']} has more than 100 values"
            for item in values:
                assert isinstance(item, int | float) and not isinstance(item, bool), (
                    f"metric {metric['Name']} must be numeric, got {item!r}"
                )
    return record


def check_emf_output(text: str) -> list[dict[str, Any]]:
    """Check every non-empty line of ``text`` as an EMF event."""
    return [check_emf_line(line) for line in text.splitlines() if line.strip()]


def metric_names(record: dict[str, Any]) -> set[str]:
    """Names the record's directives declare."""
    return {m["Name"] for d in record["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}


def units(record: dict[str, Any]) -> dict[str, str]:
    """Unit declared for each metric of the record."""
    return {m["Name"]: m["Unit"] for d in record["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
