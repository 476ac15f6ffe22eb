"""CloudWatch's percentile (``p95``, ``p99.9``) and percentile-rank (``PR(:300)``, ``PR(100:2000)``) statistics,
added to moto 5.2.5 by this project, in GetMetricData and in GetMetricStatistics' ``ExtendedStatistics``.

moto computes Sum/Average/Minimum/Maximum/SampleCount only: it answers ``None`` for any other statistic (which
its own serialiser then fails on, a 500) and leaves ``ExtendedStatistics`` out of GetMetricStatistics. Here both
are computed exactly from the period's raw samples, as CloudWatch defines them (and a single-metric alarm's
``ExtendedStatistic`` may be a percentile rank, which moto refuses; ``PutCompositeAlarm``, which moto leaves
unrouted, is added too):

- ``pNN``: the nearest-rank percentile of the samples;
- ``PR(lo:hi)``: the percentage (0-100) of the samples above ``lo`` and at or below ``hi`` (either bound may be
  left out; the lower bound is exclusive, the upper inclusive).

The samples are every value put (``Values`` with ``Counts`` count each value that many times, as moto stores
them) and every statistic set that stands for one value (``SampleCount`` 1, or ``Minimum`` equal to ``Maximum``:
``SampleCount`` times that value). Like CloudWatch, which needs raw values for these statistics, a period holding
any other statistic set has no percentile: GetMetricData leaves that period out, GetMetricStatistics leaves the
statistic out of its datapoint. CloudWatch itself keeps percentiles to about 1 % of the value (log-scaled
buckets); the emulator is exact. A statistic nobody computes is refused (``InvalidParameterValue``), not a 500.
Tests that rely on this say so.
"""

from __future__ import annotations

import math
import re
from typing import Any, SupportsFloat

from moto.cloudwatch.exceptions import InvalidParameterValue
from moto.cloudwatch.models import CloudWatchBackend, MetricAggregatedDatum, MetricDatum, Statistics
from moto.cloudwatch.responses import CloudWatchResponse

_PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?|100)$")
_NUMBER = r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_RANK = re.compile(rf"^PR\({_NUMBER}?:{_NUMBER}?\)$")
#: What moto computes itself.
_MOTO = frozenset({"Sum", "Average", "Minimum", "Maximum", "SampleCount"})


def percentile(samples: list[float], pct: float) -> float | None:
    """The nearest-rank percentile (None without samples).

    Examples
    --------
    >>> percentile([float(v) for v in range(1, 101)], 95), percentile([3.0, 1.0, 2.0], 50), percentile([], 95)
    (95.0, 2.0, None)
    """
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


def percentile_rank(samples: list[float], low: float | None, high: float | None) -> float | None:
    """The percentage of ``samples`` in ``(low, high]`` (an absent bound: unbounded); None without samples.

    Examples
    --------
    >>> percentile_rank([100.0, 200.0, 300.0, 400.0], None, 300.0), percentile_rank([100.0, 200.0], 100.0, None)
    (75.0, 50.0)
    >>> percentile_rank([], None, 1.0) is None
    True
    """
    if not samples:
        return None
    inside = sum(1 for v in samples if (low is None or v > low) and (high is None or v <= high))
    return 100.0 * inside / len(samples)


def raw_samples(data: list[Any]) -> list[float] | None:
    """The samples a period's datapoints stand for; None when a statistic set hides them (no percentile then).

    Examples
    --------
    >>> one = MetricAggregatedDatum("n", "m", 5.0, 5.0, 3.0, 15.0, [], None)  # three samples of 5
    >>> raw_samples([MetricDatum("n", "m", 1.0, [], None), one])
    [1.0, 5.0, 5.0, 5.0]
    >>> raw_samples([MetricAggregatedDatum("n", "m", 1.0, 9.0, 2.0, 10.0, [], None)]) is None
    True
    """
    samples: list[float] = []
    for datum in data:
        if isinstance(datum, MetricDatum):
            samples.append(float(datum.value))
        elif isinstance(datum, MetricAggregatedDatum):
            if datum.sample_count != 1 and datum.min != datum.max:
                return None
            samples.extend([float(datum.min)] * round(datum.sample_count))
    return samples


def statistic(stats: Statistics, stat: str) -> SupportsFloat | None:
    """``stat`` over the period of ``stats``: moto's own statistics, or a percentile or percentile rank.

    Raises
    ------
    InvalidParameterValue
        For a statistic neither moto nor this extension computes (trimmed means, ``IQM``, ...).
    """
    if stat in _MOTO:
        return _ORIGINAL(stats, stat)
    pct, rank = _extended(stat)
    samples = raw_samples(stats.metric_data)
    if samples is None:
        return None
    if pct is not None:
        return percentile(samples, float(pct.group(1)))
    low, high = (None if bound is None else float(bound) for bound in rank.groups())  # type: ignore[union-attr]
    return percentile_rank(samples, low, high)


def _extended(stat: str) -> tuple[re.Match[str] | None, re.Match[str] | None]:
    pct, rank = _PERCENTILE.fullmatch(stat), _RANK.fullmatch(stat)
    if pct is None and (rank is None or rank.groups() == (None, None)):
        raise InvalidParameterValue(f"The statistic {stat} is not computed by this emulator (pNN, PR(lo:hi)).")
    return pct, rank


_ORIGINAL = Statistics.get_statistics_for_type


def install() -> None:
    """Patch moto's CloudWatch in this process (idempotent)."""
    if getattr(Statistics, "_fleet_patched", False):
        return
    Statistics.get_statistics_for_type = statistic  # type: ignore[method-assign,assignment]
    original_data, original_statistics = CloudWatchBackend.get_metric_data, CloudWatchResponse.get_metric_statistics

    def get_metric_data(self: CloudWatchBackend, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        # A period without the statistic (a statistic set hides its samples) is no datapoint, as on CloudWatch.
        results = original_data(self, *args, **kwargs)
        for result in results:
            kept = [(t, v) for t, v in zip(result["timestamps"], result["values"], strict=True) if v is not None]
            result["timestamps"], result["values"] = [t for t, _ in kept], [v for _, v in kept]
        return results

    def get_metric_statistics(self: CloudWatchResponse) -> Any:
        extended: list[str] = self._get_param("ExtendedStatistics") or []
        for stat in extended:
            _extended(stat)  # refused before anything is read, as CloudWatch validates the request
        answer = original_statistics(self)
        for datapoint in answer.result["Datapoints"]:  # type: ignore[index]
            values = {s: statistic(datapoint, s) for s in extended}
            datapoint.extended_statistics = {s: float(v) for s, v in values.items() if v is not None}
        return answer

    original_put = CloudWatchBackend.put_metric_alarm

    def put_metric_alarm(self: CloudWatchBackend, *args: Any, **kwargs: Any) -> Any:
        # moto takes pNN only as a single-metric alarm's ExtendedStatistic; CloudWatch also takes PR(lo:hi).
        extended = kwargs.get("extended_statistic")
        if not extended or _PERCENTILE.fullmatch(extended):
            return original_put(self, *args, **kwargs)
        _extended(extended)  # refused by name unless computed here
        alarm = original_put(self, *args, **{**kwargs, "extended_statistic": None})
        alarm.extended_statistic = extended
        return alarm

    CloudWatchBackend.put_metric_alarm = put_metric_alarm  # type: ignore[method-assign]
    # moto's PutMetricAlarm handler already reads AlarmRule "to re-use this method for composite alarms", but routes
    # no PutCompositeAlarm to it; DescribeAlarms lists such an alarm under CompositeAlarms.
    CloudWatchResponse.put_composite_alarm = CloudWatchResponse.put_metric_alarm  # type: ignore[attr-defined]
    CloudWatchBackend.get_metric_data = get_metric_data  # type: ignore[method-assign]
    CloudWatchResponse.get_metric_statistics = get_metric_statistics  # type: ignore[method-assign]
    Statistics._fleet_patched = True  # type: ignore[attr-defined]
