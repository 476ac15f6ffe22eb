"""CloudWatch's verdict on an alarm's datapoints (M of N, missing-data treatment), as CloudWatch documents it.

Pure: the emulated alarm evaluation (``devtools.alarm_evaluator``) and the capacity simulator's alarms
(``fleetsim.responder``) share it, and the simulator (shipped with ``fleetctl``) needs no emulator to use it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

State = Literal["OK", "ALARM", "INSUFFICIENT_DATA"]

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": operator.gt,
    "GreaterThanOrEqualToThreshold": operator.ge,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
TREAT_MISSING = ("missing", "ignore", "breaching", "notBreaching")


@dataclass(frozen=True)
class Verdict:
    """The state the datapoints call for (``None``: keep the current one) and each period's breach."""

    state: State | None
    breaching: tuple[bool | None, ...]  # per period, oldest first; None where the period has no datapoint
    counted: int  # periods that count towards the state: breaching ones for ALARM, the others for OK


def alarm_state(
    values: Sequence[float | None],
    *,
    comparison: str,
    threshold: float,
    datapoints_to_alarm: int,
    treat_missing: str = "missing",
) -> Verdict:
    """What CloudWatch decides from the last ``EvaluationPeriods`` values (oldest first; ``None``: no datapoint).

    Examples
    --------
    >>> alarm_state([600.0, None, 700.0, 100.0, 800.0], comparison="GreaterThanThreshold", threshold=500,
    ...             datapoints_to_alarm=3, treat_missing="notBreaching").state
    'ALARM'
    >>> alarm_state([None, None], comparison="GreaterThanThreshold", threshold=0, datapoints_to_alarm=1).state
    'INSUFFICIENT_DATA'
    """
    if comparison not in _COMPARE:
        raise ValueError(f"ComparisonOperator {comparison!r} is not emulated (anomaly detection alarms are not)")
    if treat_missing not in TREAT_MISSING:
        raise ValueError(f"TreatMissingData {treat_missing!r} is not one of {TREAT_MISSING}")
    breaching = tuple(None if v is None else _COMPARE[comparison](v, threshold) for v in values)
    real = [b for b in breaching if b is not None]
    missing = len(values) - len(real)
    if not real:
        by_treatment: dict[str, State | None] = {
            "missing": "INSUFFICIENT_DATA",
            "ignore": None,
            "breaching": "ALARM",
            "notBreaching": "OK",
        }
        return Verdict(by_treatment[treat_missing], breaching, missing)
    count = sum(real) + (missing if treat_missing == "breaching" else 0)
    if count >= datapoints_to_alarm:
        return Verdict("ALARM", breaching, count)
    return Verdict("OK", breaching, len(values) - count)
