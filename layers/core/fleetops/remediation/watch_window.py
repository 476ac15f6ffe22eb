"""The watch window after a promotion: for how long a primary's alarm still blames the release just promoted.

The source of truth is the endpoint's model pointer (an SSM parameter): the promotion writes it, naming the
release it promoted and the config it replaced, and SSM records when (``LastModifiedDate``). The rollback
workflow restores from the same pointer, and a pointer it restored names no previous config, so a second
alarm after a rollback finds no promotion to undo and never walks the fleet back another version.

Examples
--------
>>> from datetime import UTC, datetime, timedelta
>>> promoted = Promotion(promoted_at=datetime(2026, 11, 21, 17, 0, tzinfo=UTC), version="v7",
...                      previous_version="v6", endpoint_config_name="manga-chat-v7-final")
>>> watch = WatchWindow(promotion=promoted, seconds=24 * 3600)
>>> watch.reason(promoted.promoted_at + timedelta(hours=2))
'watch window: v7 promoted 2 h ago'
>>> print(watch.reason(promoted.promoted_at + timedelta(hours=25)))
None
>>> watch.note(promoted.promoted_at + timedelta(hours=25))
'v7 promoted 25 h ago, after its 24 h watch window: no automatic rollback'
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field


class Promotion(BaseModel):
    """The endpoint's last promotion, as its model pointer records it (only a pointer naming a previous config)."""

    model_config = ConfigDict(frozen=True)

    promoted_at: datetime = Field(description="when the pointer was written (SSM LastModifiedDate)")
    version: str
    previous_version: str | None = None
    endpoint_config_name: str = Field(description="the config the promotion put on the endpoint")


def age(delta: timedelta) -> str:
    """A short duration for people: ``45 min``, ``2 h 5 min``, ``25 h``, ``2 d 1 h`` (days from 48 h on).

    Examples
    --------
    >>> age(timedelta(minutes=45)), age(timedelta(hours=2, minutes=5)), age(timedelta(hours=25))
    ('45 min', '2 h 5 min', '25 h')
    >>> age(timedelta(hours=49))
    '2 d 1 h'
    """
    minutes = max(0, int(delta.total_seconds() // 60))
    hours, mins = divmod(minutes, 60)
    if hours >= 48:
        days, hours = divmod(hours, 24)
        return f"{days} d" + (f" {hours} h" if hours else "")
    if hours:
        return f"{hours} h" + (f" {mins} min" if mins else "")
    return f"{mins} min"


class WatchWindow(BaseModel):
    """The endpoint's last promotion (``None``: none to undo) and how long after it the primary is watched."""

    model_config = ConfigDict(frozen=True)

    promotion: Promotion | None = None
    seconds: int = Field(ge=0)

    def reason(self, at: datetime) -> str | None:
        """Why an alarm transition at ``at`` falls inside the window, or ``None``.

        An alarm from before the promotion speaks of the release before it, not of the one promoted: outside.
        """
        if self.promotion is None or self.seconds == 0:
            return None
        since = at - self.promotion.promoted_at
        if since < timedelta(0) or since >= timedelta(seconds=self.seconds):
            return None
        return f"watch window: {self.promotion.version} promoted {age(since)} ago"

    def note(self, at: datetime) -> str | None:
        """What the notification says about the last promotion: inside the window, after it, or nothing known."""
        inside = self.reason(at)
        if inside is not None or self.promotion is None:
            return inside
        since = at - self.promotion.promoted_at
        if since < timedelta(0):
            return f"{self.promotion.version} was promoted after this alarm fired: no automatic rollback"
        window = age(timedelta(seconds=self.seconds))
        version = self.promotion.version
        return f"{version} promoted {age(since)} ago, after its {window} watch window: no automatic rollback"
