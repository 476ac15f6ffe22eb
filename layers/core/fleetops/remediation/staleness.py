"""Whether an alarm event still says what the alarm says now, or has been overtaken while it travelled.

EventBridge's retries and Lambda's async retries deliver an event up to about half an hour late, and out of
order. A late ALARM acted on after its alarm went OK would scale out a recovered variant or abort a newer
rollout. The alarm's own state (DescribeAlarms) decides; only when CloudWatch cannot be read does the event's
age decide instead.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from fleetops.remediation.alarm import ParsedAlarm

#: Without the alarm's state to compare: an event older than this is dropped (EventBridge and Lambda retry
#: an event for up to 15 minutes each, template.yaml; a fresh event arrives within seconds).
MAX_EVENT_AGE_SECONDS = 600


class AlarmNow(BaseModel):
    """The alarm as CloudWatch holds it now."""

    model_config = ConfigDict(frozen=True)

    state: str
    updated_at: datetime


def transition_time(alarm: ParsedAlarm) -> datetime:
    """When the event's transition happened (its state timestamp; the envelope's time if that is unreadable).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> at = datetime(2026, 11, 21, 19, 3, tzinfo=UTC)
    >>> transition_time(SimpleNamespace(state_timestamp="2026-11-21T19:02:00.000+0000", at=at)).isoformat()
    '2026-11-21T19:02:00+00:00'
    """
    try:
        return datetime.strptime(alarm.state_timestamp, "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        return alarm.at


def stale_because(
    alarm: ParsedAlarm, now_state: AlarmNow | None, now: datetime, *, readable: bool = True
) -> str | None:
    """Why the event is stale and must not act, or ``None`` when it still holds.

    ``now_state``: the alarm from DescribeAlarms (``None``: no such alarm, nothing to compare, the event
    stands). ``readable=False``: CloudWatch could not be asked, so the event's age decides. An event whose state
    the alarm is still in stands, however late: what it asks for is still called for.

    Examples
    --------
    >>> from datetime import timedelta
    >>> from types import SimpleNamespace
    >>> at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
    >>> event = SimpleNamespace(state="ALARM", state_timestamp="2026-11-21T19:02:00.000+0000", at=at)
    >>> print(stale_because(event, AlarmNow(state="OK", updated_at=at + timedelta(minutes=9)), at))
    stale event: the alarm has been OK since 2026-11-21T19:11:00+00:00; this ALARM from 2026-11-21T19:02:00+00:00 \
no longer holds
    >>> stale_because(event, AlarmNow(state="ALARM", updated_at=at), at) is None
    True
    >>> print(stale_because(event, None, at + timedelta(minutes=25), readable=False))
    stale event: 1500 s old, over the 600 s bound, and the alarm's state could not be read to confirm it
    """
    happened = transition_time(alarm)
    if not readable:
        age = int((now - happened).total_seconds())
        if age > MAX_EVENT_AGE_SECONDS:
            return (
                f"stale event: {age} s old, over the {MAX_EVENT_AGE_SECONDS} s bound, "
                "and the alarm's state could not be read to confirm it"
            )
        return None
    if now_state is None:
        return None
    since = now_state.updated_at.astimezone(UTC).isoformat()
    if now_state.state != alarm.state:
        return (
            f"stale event: the alarm has been {now_state.state} since {since}; "
            f"this {alarm.state} from {happened.isoformat()} no longer holds"
        )
    return None
