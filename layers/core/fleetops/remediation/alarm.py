"""EventBridge ``CloudWatch Alarm State Change`` events: validate the shape, then find kind, endpoint and variant.

The project's alarms are named ``<prefix><kind>-<endpoint>-<variant>`` (prefix ``<stack>-remediation-``).
The endpoint and variant are read from the alarm's metric dimensions, and the name must agree with
them, so an alarm renamed or re-dimensioned by hand is reported instead of acted on.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from fleetops.metrics import Dimension

if TYPE_CHECKING:
    from fleetops.remediation.models import AlarmSpec, Playbook

StateValue = Literal["ALARM", "OK", "INSUFFICIENT_DATA"]


class IgnoredAlarmError(ValueError):
    """The event is valid EventBridge but not something the responder acts on (logged and counted)."""


# --- the event as EventBridge delivers it (unknown fields are ignored: AWS adds fields over time) ---


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class AlarmState(_Lenient):
    value: StateValue
    reason: str = ""
    reason_data: str | None = Field(default=None, alias="reasonData")
    timestamp: str = Field(min_length=1)


class MetricRef(_Lenient):
    namespace: str | None = None
    name: str
    dimensions: dict[str, str] = {}


class MetricStat(_Lenient):
    metric: MetricRef
    period: int | None = None
    stat: str | None = None


class AlarmMetric(_Lenient):
    id: str
    metric_stat: MetricStat | None = Field(default=None, alias="metricStat")
    expression: str | None = None
    return_data: bool | None = Field(default=None, alias="returnData")


class AlarmConfiguration(_Lenient):
    description: str | None = None
    metrics: tuple[AlarmMetric, ...] = ()


class AlarmDetail(_Lenient):
    alarm_name: str = Field(alias="alarmName", min_length=1)
    state: AlarmState
    previous_state: AlarmState | None = Field(default=None, alias="previousState")
    configuration: AlarmConfiguration = AlarmConfiguration()


class AlarmStateChangeEvent(_Lenient):
    """The EventBridge envelope; ``time`` is the handler's "now"."""

    id: str
    detail_type: Literal["CloudWatch Alarm State Change"] = Field(alias="detail-type")
    source: Literal["aws.cloudwatch"]
    time: datetime
    region: str | None = None
    account: str | None = None
    detail: AlarmDetail


# --- what the responder works with ---


class ParsedAlarm(BaseModel):
    model_config = ConfigDict(frozen=True)

    alarm_name: str
    kind: str
    endpoint_name: str
    variant_name: str
    state: StateValue
    previous_state: StateValue | None
    state_timestamp: str
    at: datetime
    reason: str
    observed: float | None = Field(description="the worst recent datapoint, when the event carries one")
    threshold: float
    adapter: str | None = Field(default=None, description="the adapter of a per-adapter alarm (Adapter dimension)")

    @property
    def breach(self) -> float:
        """Observed / threshold (1.0 when unknown, which picks the smallest step)."""
        if self.observed is None or self.threshold <= 0:
            return 1.0
        return max(1.0, self.observed / self.threshold)


def _dimensions(detail: AlarmDetail) -> tuple[str, str, str | None, set[str]]:
    names: set[str] = set()
    found: list[tuple[str, str, str | None]] = []
    for metric in detail.configuration.metrics:
        if metric.metric_stat is None:
            continue
        names.add(metric.metric_stat.metric.name)
        dims = metric.metric_stat.metric.dimensions
        if Dimension.ENDPOINT in dims and Dimension.VARIANT in dims:
            found.append((dims[Dimension.ENDPOINT], dims[Dimension.VARIANT], dims.get(Dimension.ADAPTER)))
    if not found:
        raise IgnoredAlarmError(
            f"alarm {detail.alarm_name!r} has no {Dimension.ENDPOINT}/{Dimension.VARIANT} dimensions"
        )
    if len(set(found)) > 1:
        raise IgnoredAlarmError(
            f"alarm {detail.alarm_name!r} watches several endpoint/variant pairs: {sorted(set(found))}"
        )
    return found[0][0], found[0][1], found[0][2], names


def _datapoints(state: AlarmState) -> tuple[float | None, float | None]:
    """Worst recent datapoint and threshold from ``reasonData`` (absent or malformed: unknown)."""
    if not state.reason_data:
        return None, None
    try:
        data = json.loads(state.reason_data)
        points = [float(p) for p in data.get("recentDatapoints") or []]
        threshold = data.get("threshold")
        return (max(points) if points else None), (float(threshold) if threshold is not None else None)
    except (ValueError, TypeError, AttributeError):
        return None, None


def _kind_of(rest: str, playbook: Playbook) -> str:
    # Longest match first: a kind may be a prefix of another kind ("oom" / "oom-canary").
    for kind in sorted(playbook.alarms, key=len, reverse=True):
        if rest.startswith(f"{kind}-"):
            return kind
    raise IgnoredAlarmError(f"unknown alarm kind in {rest!r}; the playbook knows {sorted(playbook.alarms)}")


def _check_metric(spec: AlarmSpec, kind: str, names: set[str]) -> None:
    if spec.metric not in names:
        raise IgnoredAlarmError(f"a {kind!r} alarm must watch {spec.metric}, this one watches {sorted(names)}")


def parse_alarm(event: AlarmStateChangeEvent, prefix: str, playbook: Playbook) -> ParsedAlarm:
    """Find kind, endpoint, variant, state and breach size of one of the project's own alarms.

    Raises
    ------
    IgnoredAlarmError
        For an alarm the project does not own, an unknown kind, missing dimensions, or a name that
        disagrees with the dimensions; the message says which.

    Examples
    --------
    The parts of an EventBridge event that are read (``events/alarm_*.json`` hold complete ones):

    >>> from pathlib import Path
    >>> import fleetops
    >>> from fleetops.remediation.models import load_playbook
    >>> playbook = load_playbook(Path(fleetops.__file__).parents[1] / "fleet_config" / "playbook.yaml")
    >>> event = AlarmStateChangeEvent.model_validate({
    ...     "id": "1", "detail-type": "CloudWatch Alarm State Change", "source": "aws.cloudwatch",
    ...     "time": "2026-11-21T19:02:00Z",
    ...     "detail": {
    ...         "alarmName": "fleet-remediation-queue-depth-manga-chat-primary",
    ...         "state": {"value": "ALARM", "timestamp": "2026-11-21T19:02:00.000+0000",
    ...                   "reasonData": '{"recentDatapoints": [180.0], "threshold": 50}'},
    ...         "configuration": {"metrics": [{"id": "m1", "metricStat": {"metric": {
    ...             "name": "QueueDepth", "dimensions": {"EndpointName": "manga-chat", "VariantName": "primary"}}}}]},
    ...     },
    ... })
    >>> alarm = parse_alarm(event, "fleet-remediation-", playbook)
    >>> alarm.kind, alarm.endpoint_name, alarm.variant_name, alarm.breach
    ('queue-depth', 'manga-chat', 'primary', 3.6)
    >>> parse_alarm(event, "other-stack-remediation-", playbook)
    Traceback (most recent call last):
    ...
    fleetops.remediation.alarm.IgnoredAlarmError: alarm '...' is not one of ours (prefix 'other-stack-remediation-')
    """
    detail = event.detail
    if not prefix or not detail.alarm_name.startswith(prefix):
        raise IgnoredAlarmError(f"alarm {detail.alarm_name!r} is not one of ours (prefix {prefix!r})")
    rest = detail.alarm_name[len(prefix) :]
    kind = _kind_of(rest, playbook)
    endpoint_name, variant_name, adapter, names = _dimensions(detail)
    # A per-adapter alarm (one adapter of a variant) ends with its adapter: <kind>-<endpoint>-<variant>-<adapter>.
    expected = f"{kind}-{endpoint_name}-{variant_name}" + (f"-{adapter}" if adapter else "")
    if rest != expected:
        raise IgnoredAlarmError(
            f"alarm name {detail.alarm_name!r} does not match its dimensions "
            f"(endpoint {endpoint_name!r}, variant {variant_name!r}, adapter {adapter!r})"
        )
    _check_metric(playbook.alarms[kind], kind, names)
    observed, threshold = _datapoints(detail.state)
    return ParsedAlarm(
        alarm_name=detail.alarm_name,
        kind=kind,
        endpoint_name=endpoint_name,
        variant_name=variant_name,
        state=detail.state.value,
        previous_state=detail.previous_state.value if detail.previous_state else None,
        state_timestamp=detail.state.timestamp,
        at=event.time,
        reason=detail.state.reason,
        observed=observed,
        threshold=threshold if threshold is not None else playbook.alarms[kind].threshold,
        adapter=adapter,
    )
