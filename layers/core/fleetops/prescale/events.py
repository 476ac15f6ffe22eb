"""What starts a reconcile run: a schedule (EventBridge Scheduler or rule), a calendar-table change, an operator."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from fleetops.validation import problems


class InvalidEventError(ValueError):
    """The event is not one the reconciler understands; nothing was read or changed."""


class RunRequest(BaseModel):
    """A reconcile request. ``time`` is "now" for every decision, so a run is reproducible from its event."""

    model_config = ConfigDict(extra="ignore")  # not StrictModel: AWS events carry fields of their own

    time: AwareDatetime
    trigger: str = Field(default="schedule", min_length=1)
    dry_run: bool = False


class _StreamRecord(BaseModel):
    eventSource: str = Field(pattern="^aws:dynamodb$")
    dynamodb: dict[str, Any]


class _StreamEvent(BaseModel):
    Records: list[_StreamRecord] = Field(min_length=1)


def parse_event(event: Any) -> RunRequest:
    """Turn a Lambda event into a :class:`RunRequest`, or fail with a message that says what is wrong.

    Examples
    --------
    >>> parse_event({"trigger": "schedule", "time": "2026-12-04T09:00:00Z"}).time.isoformat()
    '2026-12-04T09:00:00+00:00'
    >>> parse_event({"Records": [{"eventSource": "aws:dynamodb",
    ...     "dynamodb": {"ApproximateCreationDateTime": 1796371200}}]}).trigger
    'calendar-change'
    """
    if not isinstance(event, dict):
        raise InvalidEventError(f"expected a JSON object, got {type(event).__name__}")
    try:
        if "Records" in event:
            records = _StreamEvent.model_validate(event).Records
            stamps = [float(r.dynamodb["ApproximateCreationDateTime"]) for r in records]
            return RunRequest(time=datetime.fromtimestamp(max(stamps), tz=UTC), trigger="calendar-change")
        return RunRequest.model_validate(event)
    except ValidationError as exc:
        found = "; ".join(problems(exc, root="event"))
        raise InvalidEventError(f"not a schedule, calendar-change or manual event: {found}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidEventError(f"malformed DynamoDB stream record: {exc!r}") from exc
