"""Before -> after of an audit record in a line a person can read (pure)."""

from __future__ import annotations

import json
from typing import Any

#: Keys that name the thing changed rather than describe the change.
_IDENTITY = frozenset({"name", "endpoint_name", "variant_name"})


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _scheduled_action(side: dict[str, Any]) -> str | None:
    """``MinCapacity 9, MaxCapacity 12 at(2026-12-04T19:00:00) Asia/Tokyo`` for a scheduled action, else None."""
    if not {"schedule", "min_capacity", "max_capacity"} <= set(side):
        return None
    when = f" {side['schedule']} {side.get('timezone', '')}".rstrip()
    return f"MinCapacity {side['min_capacity']}, MaxCapacity {side['max_capacity']}{when}"


def changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """What differs, one ``key: old → new`` per changed key; all of a created or removed side.

    Examples
    --------
    >>> changes({"min_capacity": 2, "max_capacity": 12}, {"min_capacity": 6, "max_capacity": 12})
    ['min_capacity: 2 → 6']
    >>> changes(None, {"name": "x", "min_capacity": 9, "schedule": "at(2026-12-04T19:00:00)"})
    ['new: min_capacity=9, schedule=at(2026-12-04T19:00:00)']
    >>> changes(None, {"min_capacity": 9, "max_capacity": 12, "schedule": "at(2026-12-04T19:00:00)", "timezone": "UTC"})
    ['new: MinCapacity 9, MaxCapacity 12 at(2026-12-04T19:00:00) UTC']
    >>> changes({"min_capacity": 9}, None)
    ['removed: min_capacity=9']
    >>> changes(None, None)
    []
    """
    if before is None and after is None:
        return []
    if before is None or after is None:
        side = after if before is None else before
        assert side is not None
        action = _scheduled_action(side)
        fields = action or ", ".join(f"{k}={_value(v)}" for k, v in sorted(side.items()) if k not in _IDENTITY)
        return [f"{'new' if before is None else 'removed'}: {fields}"]
    lines = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old != new:
            lines.append(
                f"{key}: {_value(old) if key in before else '(none)'} → {_value(new) if key in after else '(none)'}"
            )
    return lines
