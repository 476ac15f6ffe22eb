"""CloudWatch's alarm evaluation on the emulator (moto 5.2.5 stores alarms but never evaluates them).

:class:`AlarmEvaluator` is a background thread that evaluates every metric alarm in the emulated account
as CloudWatch does and, on a state change, calls ``SetAlarmState`` (so ``DescribeAlarms`` shows the state
and a ``StateReason`` naming the datapoints) and puts the ``CloudWatch Alarm State Change`` event that
CloudWatch sends on the default EventBridge bus with ``PutEvents``.

Time runs ``time_scale`` times faster than on AWS. An alarm with a ``Period`` of ``P`` seconds is evaluated
every ``min(P, 60) / time_scale`` seconds of wall-clock time (CloudWatch evaluates once a minute, high
resolution alarms every period), over its last ``EvaluationPeriods`` windows of ``P / time_scale`` seconds
each, ending at that evaluation instant. Datapoints keep their real timestamps: with ``time_scale=20`` a
60 s period is the 3 s of wall-clock time before the instant, and a container that emits every 0.5 s puts
six datapoints into it. The instants are aligned to multiples of the interval since the epoch, and each is
evaluated ``settle_s`` after it passes so that datapoints still in flight land first (CloudWatch, too,
waits for late data); instants missed while the thread was starved are evaluated late, in order. Reasons
and events quote the alarm's own ``Period`` and ``Threshold``; their timestamps are the (wall-clock)
evaluation instants and window starts.

What is evaluated, as CloudWatch documents it:

- ``Statistic`` or ``ExtendedStatistic`` (``pNN``, nearest rank over the raw samples) over each window, of
  the datapoints whose namespace, name, unit (when the alarm names one) and whole dimension set match;
- metric math: ``Metrics`` with ``MetricStat`` queries and ``Expression`` queries
  (:func:`evaluate_expression`: arithmetic, comparisons, ``IF`` and ``FILL``; anything else is refused);
- ``DatapointsToAlarm`` of ``EvaluationPeriods`` (M of N), ``ComparisonOperator``, ``Threshold``;
- ``TreatMissingData``: with no datapoint in any window, ``missing`` -> INSUFFICIENT_DATA, ``ignore`` keeps
  the state, ``breaching`` -> ALARM, ``notBreaching`` -> OK. With some datapoints, missing windows count
  as breaching under ``breaching`` and as not breaching otherwise. (CloudWatch also looks further back than
  N periods for real datapoints under ``missing``/``ignore``; that extended range is not emulated.)
- ``EvaluateLowSampleCountPercentile: ignore`` keeps the state while a percentile has fewer than
  ``10 / (1 - p)`` samples in a window;
- a new alarm starts in INSUFFICIENT_DATA (moto creates it in OK: the evaluator reads moto's
  "Unchecked: Initial alarm creation" as INSUFFICIENT_DATA), so its first evaluation sends
  INSUFFICIENT_DATA -> OK as on AWS.

Composite alarms are evaluated in the same pass, after the metric alarms, from their children's states
(:mod:`devtools.alarm_rules`): ALARM while the rule is TRUE, OK otherwise, stamped with the latest instant of
their children. Alarm actions on an SNS topic publish CloudWatch's notification (``AlarmName``,
``NewStateValue``, ``NewStateReason``, ...) on every transition into the state they are for.

Not emulated: anomaly-detection alarms (refused with a log line), actions other than SNS (Auto Scaling, EC2),
events for a ``SetAlarmState`` made by anyone else, CloudWatch's ingestion delay, a composite's actions
suppressor.

Datapoints and alarm definitions are read from moto's backend in this process rather than through
``GetMetricData``: no HTTP round trip per alarm, window and tick on two shared cores; sub-second windows
(the API takes whole seconds); and an exact match on the whole dimension set, which moto's
``GetMetricStatistics`` (subset match) and ``GetMetricData`` (order-sensitive match) do not give. The
statistics are moto's own (``Statistics``, with the project's percentile extension), so the numbers are
those ``GetMetricData`` answers. State changes and events go through the API, as CloudWatch's would.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import operator
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

import boto3
from moto.cloudwatch.models import Alarm, Dimension, MetricDatumBase, Statistics, cloudwatch_backends

from devtools.alarm_rules import AlarmRuleError, evaluate_rule, rule_alarms
from devtools.alarm_state import State, Verdict, alarm_state
from devtools.emulated_account import ACCOUNT_ID, REGION

logger = logging.getLogger(__name__)

Series = list[float | None]
#: Datapoints by (namespace, metric name).
ByMetric = dict[tuple[str | None, str | None], list[MetricDatumBase]]
_Operand = float | None | Series  # a scalar (None: no value), or one value per period

INITIAL_REASON = "Unchecked: Initial alarm creation"
DETAIL_TYPE = "CloudWatch Alarm State Change"

# ------------------------------------------------------------------------------------------------- metric math


class MetricMathError(ValueError):
    """An expression the emulator cannot evaluate: a syntax error, an unknown id, an unsupported function."""


_ARITHMETIC: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_COMPARISON: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _pointwise(fn: Callable[..., float | None], args: Sequence[_Operand], length: int) -> _Operand:
    """Apply ``fn`` per timestamp; a missing value in any argument makes the result missing there."""
    columns = [a if isinstance(a, list) else [a] * length for a in args]
    if all(not isinstance(a, list) for a in args):
        return None if any(a is None for a in args) else _safe(fn, *args)
    return [None if any(v is None for v in values) else _safe(fn, *values) for values in zip(*columns, strict=True)]


def _safe(fn: Callable[..., float | None], *values: Any) -> float | None:
    try:
        result = fn(*values)
    except (ZeroDivisionError, OverflowError):
        return None  # CloudWatch returns no datapoint where the arithmetic is undefined
    if isinstance(result, complex) or (isinstance(result, float) and not math.isfinite(result)):
        return None  # e.g. a negative number to a fractional power
    return None if result is None else float(result)


def _if(args: Sequence[_Operand], length: int) -> _Operand:
    if len(args) not in (2, 3):
        raise MetricMathError(f"IF takes 2 or 3 arguments, got {len(args)}")
    condition, when_true = args[0], args[1]
    when_false: _Operand | None = args[2] if len(args) == 3 else None

    def at(value: _Operand, i: int) -> float | None:
        return value[i] if isinstance(value, list) else value

    if not any(isinstance(a, list) for a in args):
        return None if condition is None else (when_true if condition != 0 else when_false)
    picked: Series = []
    for i in range(length):
        c = at(condition, i)
        picked.append(None if c is None else (at(when_true, i) if c != 0 else at(when_false, i)))
    return picked


def _fill(args: Sequence[_Operand], length: int) -> _Operand:
    if len(args) != 2 or isinstance(args[1], list):
        raise MetricMathError("FILL is supported as FILL(series, number) (REPEAT and LINEAR are not emulated)")
    series, value = args[0], args[1]
    if not isinstance(series, list):
        return value if series is None else series
    assert not isinstance(value, list)
    return [value if v is None else v for v in series]


_FUNCTIONS: dict[str, Callable[[Sequence[_Operand], int], _Operand]] = {"IF": _if, "FILL": _fill}


def parse_expression(expression: str) -> ast.Expression:
    """Parse a metric-math expression, refusing anything outside the supported subset.

    ``^`` is CloudWatch's power operator (Python's ``**``).

    Raises
    ------
    MetricMathError
        Naming the unsupported construct.
    """
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise MetricMathError(f"metric math {expression!r} does not parse: {exc.msg}") from exc
    for node in ast.walk(tree):
        allowed = (
            ast.Expression,
            ast.BinOp,
            ast.UnaryOp,
            ast.Compare,
            ast.Call,
            ast.Name,
            ast.Constant,
            ast.Load,
            ast.USub,
            ast.UAdd,
            *_ARITHMETIC,
            *_COMPARISON,
        )
        if not isinstance(node, allowed):
            raise MetricMathError(f"metric math {expression!r}: {type(node).__name__} is not supported")
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, int | float)):
            raise MetricMathError(f"metric math {expression!r}: only numbers are supported as constants")
        if isinstance(node, ast.Call) and (
            not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords
        ):
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise MetricMathError(f"metric math {expression!r}: function {name} is not supported (IF, FILL are)")
        if isinstance(node, ast.Compare) and len(node.ops) != 1:
            raise MetricMathError(f"metric math {expression!r}: chained comparisons are not supported")
    return tree


def evaluate_expression(expression: str, series: Mapping[str, Sequence[float | None]], length: int) -> Series:
    """Evaluate a metric-math expression over time series aligned on the same ``length`` periods.

    Parameters
    ----------
    expression
        E.g. ``"100 * running / 64"`` or ``"IF(requests > 0, 100 * FILL(errors, 0) / requests, 0)"``.
    series
        Query id -> one value per period, ``None`` where the period has no datapoint.
    length
        Number of periods (a constant result is repeated over them).

    Examples
    --------
    >>> evaluate_expression("IF(r > 0, 100 * FILL(e, 0) / r, 0)", {"r": [10.0, 0.0, None], "e": [1.0, None, 2.0]}, 3)
    [10.0, 0.0, None]
    """
    tree = parse_expression(expression)

    def value(node: ast.expr) -> _Operand:
        if isinstance(node, ast.Constant):
            assert isinstance(node.value, int | float)  # parse_expression allows numbers only
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in series:
                raise MetricMathError(f"metric math {expression!r}: unknown id {node.id!r}; known: {sorted(series)}")
            return list(series[node.id])
        if isinstance(node, ast.UnaryOp):
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            return _pointwise(lambda v: sign * v, [value(node.operand)], length)
        if isinstance(node, ast.BinOp):
            return _pointwise(_ARITHMETIC[type(node.op)], [value(node.left), value(node.right)], length)
        if isinstance(node, ast.Compare):
            compare = _COMPARISON[type(node.ops[0])]
            return _pointwise(
                lambda a, b: 1.0 if compare(a, b) else 0.0, [value(node.left), value(node.comparators[0])], length
            )
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # parse_expression allows nothing else
        return _FUNCTIONS[node.func.id]([value(arg) for arg in node.args], length)

    result = value(tree.body)
    return result if isinstance(result, list) else [result] * length


# ------------------------------------------------------------------------------------- datapoints -> alarm state

_WORDS = {
    "GreaterThanThreshold": "greater than",
    "GreaterThanOrEqualToThreshold": "greater than or equal to",
    "LessThanThreshold": "less than",
    "LessThanOrEqualToThreshold": "less than or equal to",
}


# --------------------------------------------------------------------------------------- alarms as configured


@dataclass(frozen=True)
class Query:
    """One entry of an alarm's ``Metrics`` (a single-metric alarm is one ``MetricStat`` query, id ``m1``)."""

    id: str
    namespace: str | None = None
    metric_name: str | None = None
    dimensions: tuple[tuple[str, str], ...] = ()
    stat: str | None = None
    period: int | None = None
    unit: str | None = None
    expression: str | None = None
    label: str | None = None
    return_data: bool = True

    def matches(self, datum: MetricDatumBase) -> bool:
        return (
            datum.namespace == self.namespace
            and datum.name == self.metric_name
            and {(d.name, d.value) for d in datum.dimensions} == set(self.dimensions)
            and (self.unit is None or datum.unit == self.unit)
        )

    def event_form(self) -> dict[str, Any]:
        """The query as ``detail.configuration.metrics`` of the EventBridge event spells it."""
        if self.expression is not None:
            entry: dict[str, Any] = {"id": self.id, "expression": self.expression}
            if self.label:
                entry["label"] = self.label
            entry["returnData"] = self.return_data
            return entry
        stat: dict[str, Any] = {
            "metric": {"namespace": self.namespace, "name": self.metric_name, "dimensions": dict(self.dimensions)},
            "period": self.period,
            "stat": self.stat,
        }
        if self.unit:
            stat["unit"] = self.unit
        return {"id": self.id, "metricStat": stat, "returnData": self.return_data}


@dataclass(frozen=True)
class AlarmConfig:
    """The parts of a metric alarm that evaluation needs, read from moto's backend."""

    name: str
    arn: str
    description: str | None
    queries: tuple[Query, ...]
    period: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing: str
    low_sample_percentiles: str | None
    state: State
    state_reason: str
    state_reason_data: str
    state_timestamp: datetime
    unchecked: bool  # never evaluated: moto's "OK, Unchecked: Initial alarm creation"
    actions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # state -> action ARNs (when enabled)

    @property
    def single_metric(self) -> bool:
        return len(self.queries) == 1 and self.queries[0].expression is None

    @property
    def returned(self) -> Query:
        returning = [q for q in self.queries if q.return_data]
        if len(returning) != 1:
            raise MetricMathError(f"alarm {self.name!r} must return exactly one query, returns {len(returning)}")
        return returning[0]


def _number(value: Any) -> int | None:
    return None if value in (None, "") else int(float(value))


def _dimensions(dimensions: Sequence[Dimension]) -> tuple[tuple[str, str], ...]:
    return tuple((str(d.name), str(d.value)) for d in dimensions)


def _actions(alarm: Alarm) -> dict[str, tuple[str, ...]]:
    if str(alarm.actions_enabled).lower() == "false":
        return {}
    return {
        "ALARM": tuple(alarm.alarm_actions or ()),
        "OK": tuple(alarm.ok_actions or ()),
        "INSUFFICIENT_DATA": tuple(alarm.insufficient_data_actions or ()),
    }


def _state(alarm: Alarm) -> tuple[State, bool]:
    """The alarm's state as AWS has it (moto's initial OK is AWS's INSUFFICIENT_DATA), and whether it is that one."""
    unchecked = alarm.state_value == "OK" and alarm.state_reason == INITIAL_REASON
    return cast(State, "INSUFFICIENT_DATA" if unchecked else alarm.state_value), unchecked


def _config(alarm: Alarm) -> AlarmConfig | None:
    """An evaluable view of a moto metric alarm, or None for composite and anomaly-detection alarms."""
    if getattr(alarm, "rule", None) or alarm.threshold_metric_id:
        return None
    queries: list[Query] = []
    if alarm.metric_data_queries:
        for q in alarm.metric_data_queries:
            stat = q.metric_stat
            queries.append(
                Query(
                    id=q.id,
                    namespace=stat.metric.namespace if stat else None,
                    metric_name=stat.metric.metric_name if stat else None,
                    dimensions=_dimensions(stat.metric.dimensions) if stat else (),
                    stat=stat.stat if stat else None,
                    period=_number(stat.period) if stat else None,
                    unit=(stat.unit or None) if stat else None,
                    expression=q.expression,
                    label=q.label,
                    return_data=q.return_data is None or str(q.return_data).lower() == "true",
                )
            )
    else:
        queries.append(
            Query(
                id="m1",
                namespace=alarm.namespace,
                metric_name=alarm.metric_name,
                dimensions=_dimensions(alarm.dimensions),
                stat=alarm.extended_statistic or alarm.statistic,
                period=_number(alarm.period),
                unit=alarm.unit or None,
            )
        )
    periods = {q.period for q in queries if q.period}
    if len(periods) != 1:
        raise MetricMathError(f"alarm {alarm.name!r} needs one period over its metrics, has {sorted(periods)}")
    evaluation_periods = _number(alarm.evaluation_periods) or 1
    state, unchecked = _state(alarm)
    return AlarmConfig(
        name=alarm.name,
        arn=alarm.alarm_arn,
        description=alarm.description or None,
        queries=tuple(queries),
        period=periods.pop(),
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=_number(alarm.datapoints_to_alarm) or evaluation_periods,
        threshold=float(alarm.threshold),
        comparison=alarm.comparison_operator,
        treat_missing=alarm.treat_missing_data or "missing",
        low_sample_percentiles=alarm.evaluate_low_sample_count_percentile,
        state=state,
        state_reason=alarm.state_reason,
        state_reason_data=alarm.state_reason_data,
        state_timestamp=alarm.state_updated_timestamp,
        unchecked=unchecked,
        actions=_actions(alarm),
    )


# ------------------------------------------------------------------------------------------ reasons and events


def _aws_timestamp(moment: datetime) -> str:
    """``2026-11-21T19:02:00.000+0000``, as CloudWatch writes state timestamps."""
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+0000"


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def state_reason(config: AlarmConfig, verdict: Verdict, values: Sequence[float | None], starts: Sequence[float]) -> str:
    """The ``StateReason`` CloudWatch writes, e.g. ``Threshold Crossed: 1 out of the last 1 datapoints [...]``."""
    n = len(values)
    assert verdict.state is not None
    if verdict.state == "INSUFFICIENT_DATA":
        return f"Insufficient Data: {_plural(n, 'datapoint')} {'was' if n == 1 else 'were'} unknown."
    if all(v is None for v in values):
        treated = "Breaching" if verdict.state == "ALARM" else "NonBreaching"
        return (
            f"Threshold Crossed: no datapoints were received for {_plural(n, 'period')} and "
            f"{_plural(n, 'missing datapoint')} {'was' if n == 1 else 'were'} treated as [{treated}]."
        )
    breach = verdict.state == "ALARM"
    quoted = ", ".join(
        f"{values[i]} ({_at(starts[i]).strftime('%d/%m/%y %H:%M:%S')})"
        for i in reversed(range(n))
        if verdict.breaching[i] is breach
    )
    minimum = config.datapoints_to_alarm if breach else n - config.datapoints_to_alarm + 1
    return (
        f"Threshold Crossed: {verdict.counted} out of the last {n} datapoints [{quoted}] "
        f"{'was' if verdict.counted == 1 else 'were'} {'' if breach else 'not '}{_WORDS[config.comparison]} "
        f"the threshold ({config.threshold}) (minimum {_plural(minimum, 'datapoint')} for "
        f"{config.state} -> {verdict.state} transition)."
    )


def reason_data(
    config: AlarmConfig,
    values: Sequence[float | None],
    starts: Sequence[float],
    samples: Sequence[float | None],
    now: float,
) -> dict[str, Any]:
    """The ``StateReasonData`` document (``recentDatapoints`` oldest first, ``evaluatedDatapoints`` newest first)."""
    data: dict[str, Any] = {
        "version": "1.0",
        "queryDate": _aws_timestamp(_at(now)),
        "startDate": _aws_timestamp(_at(starts[0])),
    }
    if config.single_metric:
        data["statistic"] = config.queries[0].stat
    data["period"] = config.period
    data["recentDatapoints"] = [v for v in values if v is not None]
    data["threshold"] = config.threshold
    evaluated = []
    for i in reversed(range(len(values))):
        if values[i] is None:
            continue
        point: dict[str, Any] = {"timestamp": _aws_timestamp(_at(starts[i]))}
        if config.single_metric and samples[i] is not None:
            point["sampleCount"] = samples[i]
        point["value"] = values[i]
        evaluated.append(point)
    data["evaluatedDatapoints"] = evaluated
    return data


def event_detail(config: AlarmConfig, state: State, reason: str, reason_json: str, at: float) -> dict[str, Any]:
    """``detail`` of the ``CloudWatch Alarm State Change`` event, as in ``events/alarm_*.json``."""
    previous: dict[str, Any] = {"value": config.state, "reason": config.state_reason}
    if config.state_reason_data and config.state_reason_data != "{}":
        previous["reasonData"] = config.state_reason_data
    previous["timestamp"] = _aws_timestamp(config.state_timestamp)
    configuration: dict[str, Any] = {}
    if config.description:
        configuration["description"] = config.description
    configuration["metrics"] = [q.event_form() for q in config.queries]
    return {
        "alarmName": config.name,
        "state": {
            "value": state,
            "reason": reason,
            "reasonData": reason_json,
            "timestamp": _aws_timestamp(_at(at)),
        },
        "previousState": previous,
        "configuration": configuration,
    }


# ---------------------------------------------------------------------------------------------- the evaluator


@dataclass(frozen=True)
class Transition:
    """A state change the evaluator made, with the event it put on the bus."""

    alarm_name: str
    previous: State
    state: State
    reason: str
    reason_data: dict[str, Any]
    instant: float  # the evaluation instant (wall-clock end of the last window evaluated)
    at: float  # wall-clock time the evaluation ran (later than ``instant`` by ``settle_s`` or more)
    detail: dict[str, Any] = field(repr=False)


class AlarmEvaluator:
    """Evaluates every metric alarm of the emulated account in a background thread, ``time_scale`` times faster.

    Parameters
    ----------
    time_scale
        How much faster than AWS time runs: a ``Period`` of 60 s is ``60 / time_scale`` s of wall-clock time.
    settle_s
        Wall-clock seconds an evaluation instant waits for datapoints still in flight.
    max_runtime_s
        The thread stops itself after this long, so a forgotten evaluator never outlives a test run.
    max_catch_up
        Most evaluation instants of one alarm evaluated late, in order, after the thread was starved.
    account_id, region
        The emulated account whose alarms are evaluated.

    Examples
    --------
    >>> with AlarmEvaluator(time_scale=60) as evaluator:  # doctest: +SKIP
    ...     ship_emf_lines(...)
    ...     evaluator.wait_for("stack-remediation-queue-depth-ep-primary", "ALARM", timeout_s=10)
    """

    def __init__(
        self,
        *,
        time_scale: float = 20.0,
        settle_s: float = 0.2,
        max_runtime_s: float = 900.0,
        max_catch_up: int = 20,
        account_id: str = ACCOUNT_ID,
        region: str = REGION,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be positive, got {time_scale}")
        self.time_scale = time_scale
        self.settle_s = settle_s
        self.max_runtime_s = max_runtime_s
        self.max_catch_up = max_catch_up
        self._account_id, self._region = account_id, region
        self._changed = threading.Condition()
        self._transitions: list[Transition] = []
        self._evaluated: dict[str, float] = {}  # alarm -> latest instant evaluated
        self._refused: dict[str, str] = {}  # alarm -> why it cannot be evaluated (logged once)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._session = boto3.session.Session()
        self._clients: dict[str, Any] = {}

    # --- time ---

    def scaled(self, seconds: float) -> float:
        """Wall-clock seconds that stand for ``seconds`` of alarm time."""
        return seconds / self.time_scale

    def window_start(self, period_s: float, now: float | None = None) -> float:
        """Start of the window that contains ``now`` of an alarm whose ``Period`` is ``period_s`` (at most 60).

        Such an alarm's windows are its evaluation steps, aligned to the epoch; longer periods slide by a minute.
        """
        length = self.scaled(period_s)
        return math.floor((time.time() if now is None else now) / length) * length

    def sleep_to_next_window(self, period_s: float, offset_s: float = 0.05) -> float:
        """Sleep until ``offset_s`` after the next window of a ``period_s`` period begins; returns its start."""
        start = self.window_start(period_s) + self.scaled(period_s)
        time.sleep(max(0.0, start + offset_s - time.time()))
        return start

    # --- lifecycle ---

    def start(self) -> None:
        """Start evaluating in the background (no-op when already running)."""
        from devtools.emulator_extensions import cloudwatch

        cloudwatch.install()  # percentile statistics, which moto leaves empty
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="alarm-evaluator", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread, letting an evaluation in progress finish (bounded by ``timeout_s``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                logger.error("alarm evaluator did not stop within %s s", timeout_s)
            self._thread = None

    def __enter__(self) -> AlarmEvaluator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        deadline = time.monotonic() + self.max_runtime_s
        poll_s = max(0.02, min(0.25, self.scaled(60.0) / 10))  # a tenth of a scaled minute
        while not self._stop.wait(poll_s):
            if time.monotonic() > deadline:
                logger.warning("alarm evaluator stopped itself after max_runtime_s=%s", self.max_runtime_s)
                return
            try:
                self.evaluate_due()
            except Exception:  # one bad pass must not end the evaluation of every alarm
                logger.exception("alarm evaluation pass failed")

    # --- what tests read ---

    @property
    def transitions(self) -> list[Transition]:
        """Every state change so far, oldest first."""
        with self._changed:
            return list(self._transitions)

    @property
    def refused(self) -> dict[str, str]:
        """Alarms that cannot be evaluated, and why (unsupported metric math, statistic, operator)."""
        with self._changed:
            return dict(self._refused)

    def wait_for(self, alarm_name: str, state: State, *, after: float = 0.0, timeout_s: float = 30.0) -> Transition:
        """The first transition of ``alarm_name`` into ``state`` at an evaluation instant at or after ``after``.

        Raises
        ------
        TimeoutError
            After ``timeout_s``, with the alarm's transitions so far.
        """
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for t in self._transitions:
                    if t.alarm_name == alarm_name and t.state == state and t.instant >= after:
                        return t
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(t.previous, t.state, t.reason) for t in self._transitions if t.alarm_name == alarm_name]
                    refused = self._refused.get(alarm_name)
                    raise TimeoutError(
                        f"{alarm_name} did not go to {state} within {timeout_s} s; transitions: {seen}"
                        + (f"; refused: {refused}" if refused else "")
                    )
                self._changed.wait(left)

    def wait_evaluated(self, alarm_names: Sequence[str], *, after: float, timeout_s: float = 30.0) -> None:
        """Wait until each alarm has been evaluated at an instant at or after wall time ``after``.

        Raises
        ------
        ValueError
            At once for an alarm the emulator refuses to evaluate (unsupported metric math or operator).
        TimeoutError
            After ``timeout_s``, naming the alarms not evaluated yet.
        """
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while pending := [n for n in alarm_names if self._evaluated.get(n, -math.inf) < after]:
                refused = {n: self._refused[n] for n in pending if n in self._refused}
                if refused:
                    raise ValueError(f"alarms the emulator cannot evaluate: {refused}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"not evaluated after {after} within {timeout_s} s: {pending}")
                self._changed.wait(left)

    # --- evaluation ---

    def _client(self, service: Literal["cloudwatch", "events", "sns"]) -> Any:
        if service not in self._clients:
            self._clients[service] = self._session.client(service, region_name=self._region)
        return self._clients[service]

    def evaluate_due(self, now: float | None = None) -> list[Transition]:
        """Evaluate every alarm at each of its evaluation instants that has passed; returns the state changes made.

        Instants missed while the thread was starved (a loaded machine) are evaluated in order, up to
        ``max_catch_up`` of them, as CloudWatch never skips an evaluation. The thread calls this; call it
        yourself only while the thread is stopped (its API clients are not shared between threads).
        """
        now = time.time() if now is None else now
        backend = cloudwatch_backends[self._account_id][self._region]
        # One snapshot per pass (the server thread appends meanwhile), by metric: each query then reads its own
        # metric's datapoints, not every datapoint the account holds.
        data: ByMetric = {}
        for datum in list(backend.metric_data):
            data.setdefault((datum.namespace, datum.name), []).append(datum)
        made: list[Transition] = []
        alarms = list(backend.alarms.values())
        for alarm in alarms:
            if alarm.name in self._refused or getattr(alarm, "rule", None):
                continue
            try:
                config = _config(alarm)
                if config is None:
                    self._refuse(alarm.name, "anomaly-detection alarms are not emulated")
                    continue
                interval = self.scaled(min(config.period, 60))
                due = math.floor((now - self.settle_s) / interval)
                last = self._evaluated.get(config.name)
                first = due if last is None else max(round(last / interval) + 1, due - self.max_catch_up + 1)
                for k in range(first, due + 1):
                    transition = self._evaluate(config, k * interval, now, data)
                    with self._changed:
                        self._evaluated[config.name] = k * interval
                        if transition is not None:
                            self._transitions.append(transition)
                            made.append(transition)
                        self._changed.notify_all()
                    config = _config(alarm) or config  # SetAlarmState changed moto's alarm in place
            except (MetricMathError, ValueError) as exc:
                self._refuse(alarm.name, str(exc))
            except Exception:  # e.g. the alarm was deleted meanwhile: the next pass tries again
                logger.exception("evaluating alarm %s failed", alarm.name)
        for alarm in alarms:  # after their children: a composite sees this pass's states
            if getattr(alarm, "rule", None) and alarm.name not in self._refused:
                try:
                    transition = self._evaluate_composite(alarm, backend.alarms, now)
                except AlarmRuleError as exc:
                    self._refuse(alarm.name, str(exc))
                    continue
                if transition is not None:
                    made.append(transition)
        return made

    def _evaluate_composite(self, alarm: Alarm, alarms: Mapping[str, Alarm], now: float) -> Transition | None:
        rule = str(alarm.rule)
        children = rule_alarms(rule)
        states = {name: _state(alarms[name])[0] for name in children if name in alarms}
        fired = evaluate_rule(rule, states)
        instant = max((self._evaluated.get(name, -math.inf) for name in children), default=-math.inf)
        instant = now if instant == -math.inf else instant
        previous, _ = _state(alarm)
        state: State = "ALARM" if fired else "OK"
        transition = None
        if state != previous:
            children_states = ", ".join(f"{n}: {v}" for n, v in states.items())
            reason = f"{' '.join(rule.split())} is {'TRUE' if fired else 'FALSE'} ({children_states})"
            self._client("cloudwatch").set_alarm_state(AlarmName=alarm.name, StateValue=state, StateReason=reason)
            detail = {
                "alarmName": alarm.name,
                "state": {"value": state, "reason": reason, "timestamp": _aws_timestamp(_at(instant))},
                "previousState": {
                    "value": previous,
                    "reason": alarm.state_reason,
                    "timestamp": _aws_timestamp(alarm.state_updated_timestamp),
                },
                "configuration": {
                    "alarmRule": rule,
                    **({"description": alarm.description} if alarm.description else {}),
                },
            }
            self._put_event(alarm.name, alarm.alarm_arn, detail, instant)
            self._act(alarm.name, alarm.alarm_arn, alarm.description, _actions(alarm), previous, state, reason, instant)
            logger.info("composite alarm %s: %s -> %s (%s)", alarm.name, previous, state, reason)
            transition = Transition(alarm.name, previous, state, reason, {}, instant, now, detail)
        with self._changed:
            self._evaluated[alarm.name] = max(instant, self._evaluated.get(alarm.name, -math.inf))
            if transition is not None:
                self._transitions.append(transition)
            self._changed.notify_all()
        return transition

    def _put_event(self, name: str, arn: str, detail: dict[str, Any], instant: float) -> None:
        answer = self._client("events").put_events(
            Entries=[
                {
                    "Source": "aws.cloudwatch",
                    "DetailType": DETAIL_TYPE,
                    "Detail": json.dumps(detail),
                    "Resources": [arn],
                    "Time": _at(instant),
                }
            ]
        )
        if answer.get("FailedEntryCount"):
            logger.error("PutEvents refused the state change of %s: %s", name, answer["Entries"])

    def _act(
        self,
        name: str,
        arn: str,
        description: str | None,
        actions: Mapping[str, tuple[str, ...]],
        previous: State,
        state: State,
        reason: str,
        instant: float,
    ) -> None:
        """Publish CloudWatch's notification to each SNS topic among the actions for ``state``."""
        message = {
            "AlarmName": name,
            "AlarmDescription": description,
            "AWSAccountId": self._account_id,
            "NewStateValue": state,
            "NewStateReason": reason,
            "StateChangeTime": _aws_timestamp(_at(instant)),
            "Region": self._region,
            "AlarmArn": arn,
            "OldStateValue": previous,
        }
        for target in actions.get(state, ()):
            if ":sns:" not in target:
                logger.warning("alarm %s: action %s is not emulated (SNS topics only)", name, target)
                continue
            self._client("sns").publish(
                TopicArn=target, Subject=f'{state}: "{name}" in {self._region}'[:100], Message=json.dumps(message)
            )

    def _refuse(self, alarm_name: str, why: str) -> None:
        logger.error("alarm %s is not evaluated by the emulator: %s", alarm_name, why)
        with self._changed:
            self._refused[alarm_name] = why
            self._changed.notify_all()

    def _window(
        self, query: Query, starts: Sequence[float], length: float, data: ByMetric
    ) -> tuple[Series, list[float | None]]:
        """One statistic value and sample count per window (None where a window has no datapoint)."""
        buckets: list[list[MetricDatumBase]] = [[] for _ in starts]
        for datum in data.get((query.namespace, query.metric_name), ()):
            if not query.matches(datum):
                continue
            index = math.floor((datum.timestamp.replace(tzinfo=UTC).timestamp() - starts[0]) / length)
            if 0 <= index < len(starts):
                buckets[index].append(datum)
        values: Series = []
        samples: list[float | None] = []
        for start, bucket in zip(starts, buckets, strict=True):
            if not bucket:
                values.append(None)
                samples.append(None)
                continue
            stats = Statistics([str(query.stat)], _at(start).replace(tzinfo=None))
            stats.metric_data = bucket
            value = stats.get_statistics_for_type(str(query.stat))
            if value is None:
                raise ValueError(f"statistic {query.stat!r} is not emulated")
            values.append(float(value))
            samples.append(float(stats.calc_sample_count()))
        return values, samples

    def _too_few_samples(self, config: AlarmConfig, samples: Sequence[float | None]) -> bool:
        stat = config.queries[0].stat or ""
        if config.low_sample_percentiles != "ignore" or not config.single_metric or not stat.startswith("p"):
            return False
        needed = 10 / (1 - float(stat[1:]) / 100) if float(stat[1:]) < 100 else math.inf
        return any(s is not None and s < needed for s in samples)

    def _evaluate(self, config: AlarmConfig, instant: float, now: float, data: ByMetric) -> Transition | None:
        length = self.scaled(config.period)
        n = config.evaluation_periods
        starts = [instant - (n - i) * length for i in range(n)]
        series: dict[str, Series] = {}
        samples: list[float | None] = [None] * n
        for query in config.queries:
            if query.expression is None:
                series[query.id], samples = self._window(query, starts, length, data)
            else:
                series[query.id] = evaluate_expression(query.expression, series, n)
        values = series[config.returned.id]
        verdict = alarm_state(
            values,
            comparison=config.comparison,
            threshold=config.threshold,
            datapoints_to_alarm=config.datapoints_to_alarm,
            treat_missing=config.treat_missing,
        )
        if verdict.state is None or self._too_few_samples(config, samples):
            verdict = Verdict(None, verdict.breaching, verdict.counted)
        state = verdict.state or config.state
        if state == config.state:
            if config.unchecked:  # moto's OK becomes AWS's initial INSUFFICIENT_DATA; no transition, no event
                self._client("cloudwatch").set_alarm_state(
                    AlarmName=config.name, StateValue=state, StateReason=INITIAL_REASON
                )
            return None
        reason = state_reason(config, verdict, values, starts)
        # Stamped with the instant, not the time the pass ran: instants caught up in one pass stay distinct
        # (the responder's idempotency key is the alarm name and the state timestamp).
        data_doc = reason_data(config, values, starts, samples, instant)
        data_json = json.dumps(data_doc, separators=(",", ":"))  # one string: DescribeAlarms and the event agree
        self._client("cloudwatch").set_alarm_state(
            AlarmName=config.name, StateValue=state, StateReason=reason, StateReasonData=data_json
        )
        detail = event_detail(config, state, reason, data_json, instant)
        self._put_event(config.name, config.arn, detail, instant)
        self._act(config.name, config.arn, config.description, config.actions, config.state, state, reason, instant)
        logger.info("alarm %s: %s -> %s (%s)", config.name, config.state, state, reason)
        return Transition(config.name, config.state, state, reason, data_doc, instant, now, detail)
