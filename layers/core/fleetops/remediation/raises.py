"""Raises of MinCapacity the alarm responder made, and when each may come back down (pure; no AWS here).

A scale-out pins the variant's MinCapacity above the pre-scale plan. The responder keeps one
:class:`RaiseRecord` per variant (``fleetops.remediation.state_table`` stores it): which alarms are still in
ALARM, and since when all of them are OK. The pre-scale reconciler releases a raise whose alarms have been OK
for the playbook's ``rails.raise_hold_seconds`` (:func:`release_due`) by setting MinCapacity back to the plan's
level; target tracking then scales in as usual.

Examples
--------
Two alarms raise the primary; the raise is released only once both have been OK for the hold time.

>>> from datetime import UTC, datetime, timedelta
>>> at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
>>> r = raised(None, endpoint_name="manga-chat", variant_name="primary", alarm_name="queue", min_capacity=6, at=at)
>>> r = alarmed(r, "saturation")
>>> r = cleared(r, "queue", at + timedelta(minutes=10))
>>> sorted(r.in_alarm), r.cleared_at  # saturation still holds it
(['saturation'], None)
>>> r = cleared(r, "saturation", at + timedelta(minutes=20))
>>> r.cleared_at == at + timedelta(minutes=20)
True
>>> hold = timedelta(seconds=900)
>>> release_due(r, at + timedelta(minutes=34), hold), release_due(r, at + timedelta(minutes=35), hold)
(False, True)
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RaiseRecord(BaseModel):
    """One variant's MinCapacity raise and the alarms that hold it up.

    Attributes
    ----------
    endpoint_name, variant_name
        The scalable target that was raised.
    min_capacity
        The MinCapacity the responder set last.
    raised_at
        The alarm transition time of the last raise.
    alarm_names
        Every alarm that raised it or went ALARM while it stood (for the release's audit record).
    in_alarm
        The alarms among them still in ALARM.
    cleared_at
        When the last of them went OK; ``None`` while any is in ALARM.
    """

    model_config = ConfigDict(frozen=True)

    endpoint_name: str = Field(min_length=1)
    variant_name: str = Field(min_length=1)
    min_capacity: int = Field(ge=0)
    raised_at: datetime
    alarm_names: frozenset[str] = frozenset()
    in_alarm: frozenset[str] = frozenset()
    cleared_at: datetime | None = None

    @model_validator(mode="after")
    def _cleared_only_when_no_alarm_holds_it(self) -> RaiseRecord:
        if bool(self.in_alarm) == (self.cleared_at is not None):
            raise ValueError("cleared_at is set exactly when no alarm is in ALARM any more")
        if not self.in_alarm <= self.alarm_names:
            raise ValueError("in_alarm must be among alarm_names")
        return self


def raised(
    record: RaiseRecord | None,
    *,
    endpoint_name: str,
    variant_name: str,
    alarm_name: str,
    min_capacity: int,
    at: datetime,
) -> RaiseRecord:
    """The record after the responder set MinCapacity to ``min_capacity`` for ``alarm_name`` at ``at``.

    A raise on top of a standing one keeps the other alarms it still waits for.
    """
    names = record.alarm_names if record is not None else frozenset()
    holding = record.in_alarm if record is not None else frozenset()
    return RaiseRecord(
        endpoint_name=endpoint_name,
        variant_name=variant_name,
        min_capacity=min_capacity,
        raised_at=at,
        alarm_names=names | {alarm_name},
        in_alarm=holding | {alarm_name},
    )


def alarmed(record: RaiseRecord | None, alarm_name: str) -> RaiseRecord | None:
    """The record after ``alarm_name`` went ALARM without raising anything (cooldown, cap, dry run, ...).

    The variant is under pressure again, so a standing raise waits for this alarm too and its hold starts
    over; without a standing raise there is nothing to hold.
    """
    if record is None:
        return None
    return record.model_copy(
        update={
            "alarm_names": record.alarm_names | {alarm_name},
            "in_alarm": record.in_alarm | {alarm_name},
            "cleared_at": None,
        }
    )


def cleared(record: RaiseRecord | None, alarm_name: str, at: datetime) -> RaiseRecord | None:
    """The record after ``alarm_name`` went OK at ``at``; ``cleared_at`` is set when it was the last one."""
    if record is None or alarm_name not in record.in_alarm:
        return record
    holding = record.in_alarm - {alarm_name}
    return record.model_copy(update={"in_alarm": holding, "cleared_at": None if holding else at})


def cleared_by_alarms(record: RaiseRecord, ok_since: datetime) -> RaiseRecord:
    """The record as CloudWatch tells it: every alarm still holding it has been OK since ``ok_since``.

    For an OK event that never reached the responder, or came before the ALARM it answers (EventBridge keeps
    neither delivery nor order): without it the raise would wait for an alarm that is long OK.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
    >>> r = raised(None, endpoint_name="e", variant_name="primary", alarm_name="q", min_capacity=6, at=at)
    >>> cleared_by_alarms(r, at - timedelta(minutes=1)).cleared_at == at - timedelta(minutes=1)
    True
    """
    for name in record.in_alarm:
        record = cleared(record, name, ok_since) or record
    return record


def release_due(record: RaiseRecord, now: datetime, hold: timedelta) -> bool:
    """True when every alarm of the raise has been OK for at least ``hold`` at ``now``.

    The pre-scale reconciler calls it on each record of
    :meth:`~fleetops.remediation.state_table.RemediationStateStore.raises` with its run time and
    ``Playbook.rails.raise_hold``; for each ``True`` it sets the variant's MinCapacity back to the plan's
    level, writes an audit record with :func:`release_reason`, then calls
    :meth:`~fleetops.remediation.state_table.RemediationStateStore.forget_raise` with the record.
    """
    return record.cleared_at is not None and now - record.cleared_at >= hold


def release_reason(record: RaiseRecord, now: datetime, plan_min_capacity: int) -> str:
    """The audit reason for releasing ``record`` to the plan's MinCapacity at ``now``.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
    >>> r = raised(None, endpoint_name="e", variant_name="primary", alarm_name="q", min_capacity=6, at=at)
    >>> print(release_reason(cleared(r, "q", at + timedelta(minutes=5)), at + timedelta(minutes=20), 2))
    ... # doctest: +NORMALIZE_WHITESPACE
    alarm responder's raise to MinCapacity 6 (at 2026-11-21T19:02:00+00:00, by q) released to the plan's 2:
    its alarms have been OK for 900s
    """
    ok_s = int((now - record.cleared_at).total_seconds()) if record.cleared_at is not None else 0
    return (
        f"alarm responder's raise to MinCapacity {record.min_capacity} (at {record.raised_at.isoformat()}, "
        f"by {', '.join(sorted(record.alarm_names))}) released to the plan's {plan_min_capacity}: "
        f"its alarms have been OK for {ok_s}s"
    )
