"""Times on the command line: reading ``--since``/``--at``/``--now`` and scheduled actions, and printing them.

Pure functions; a bad value raises :class:`~fleetctl.errors.CliError` (exit 2) saying what to write instead.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fleetctl.errors import CliError, ExitCode

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def zone(name: str, flag: str = "--timezone") -> ZoneInfo:
    """The IANA zone ``name``.

    Examples
    --------
    >>> zone("Mars/Base")
    Traceback (most recent call last):
    ...
    fleetctl.errors.CliError: --timezone: unknown time zone 'Mars/Base' (use an IANA name such as 'Asia/Tokyo')
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CliError(
            ExitCode.USAGE,
            f"{flag}: unknown time zone {name!r} (use an IANA name such as 'Asia/Tokyo')",
            "list the names with: python -c 'import zoneinfo; print(sorted(zoneinfo.available_timezones()))'",
        ) from None


def parse_time(text: str, tz: ZoneInfo, flag: str, now: datetime) -> datetime:
    """``now``, or an ISO time; one without an offset is read in ``tz``. Returns an aware UTC datetime.

    Examples
    --------
    >>> parse_time("2026-12-04T20:00", ZoneInfo("Asia/Tokyo"), "--at", datetime.now(UTC)).isoformat()
    '2026-12-04T11:00:00+00:00'
    """
    if text.strip().lower() == "now":
        return now.astimezone(UTC)
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CliError(
            ExitCode.USAGE,
            f"{flag}: cannot read {text!r} as a time",
            f"write it as 2026-12-04T20:00 (in --timezone) or 2026-12-04T11:00Z, e.g. {flag} 2026-12-04T20:00",
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=tz)
    return value.astimezone(UTC)


def parse_since(text: str, tz: ZoneInfo, now: datetime) -> datetime:
    """A duration back from ``now`` (``90m``, ``6h``, ``2d``, ``1w``) or a time as :func:`parse_time` reads it.

    Examples
    --------
    >>> parse_since("6h", ZoneInfo("UTC"), datetime(2026, 12, 4, 12, tzinfo=UTC)).isoformat()
    '2026-12-04T06:00:00+00:00'
    """
    match = _DURATION.match(text.strip().lower())
    if match:
        amount, unit = float(match.group(1)), match.group(2)
        return now.astimezone(UTC) - timedelta(**{_UNITS[unit]: amount})
    try:
        return parse_time(text, tz, "--since", now)
    except CliError:
        raise CliError(
            ExitCode.USAGE,
            f"--since: cannot read {text!r}",
            "give a duration (30m, 6h, 2d, 1w) or a time (2026-12-04T20:00, read in --timezone)",
        ) from None


def utc(value: datetime) -> str:
    """``2026-12-04 10:00 UTC``.

    Examples
    --------
    >>> utc(datetime(2026, 12, 4, 10, 0, 30, tzinfo=UTC))
    '2026-12-04 10:00 UTC'
    """
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def local(value: datetime, timezone: str) -> str:
    """``19:00 Asia/Tokyo`` (with the date when it differs from the UTC date).

    Examples
    --------
    >>> local(datetime(2026, 12, 4, 10, tzinfo=UTC), "Asia/Tokyo")
    '19:00 Asia/Tokyo'
    >>> local(datetime(2026, 12, 4, 20, tzinfo=UTC), "Asia/Tokyo")
    '12-05 05:00 Asia/Tokyo'
    """
    there = value.astimezone(ZoneInfo(timezone))
    day = "" if there.date() == value.astimezone(UTC).date() else f"{there:%m-%d} "
    return f"{day}{there:%H:%M} {timezone}"


def ago(value: datetime, now: datetime) -> str:
    """``3h 5m ago`` / ``in 2d 4h``, to the minute.

    Examples
    --------
    >>> ago(datetime(2026, 12, 4, 9, tzinfo=UTC), datetime(2026, 12, 4, 12, 5, tzinfo=UTC))
    '3h 5m ago'
    >>> ago(datetime(2026, 12, 6, 16, tzinfo=UTC), datetime(2026, 12, 4, 12, tzinfo=UTC))
    'in 2d 4h'
    """
    seconds = int((now - value).total_seconds())
    minutes = abs(seconds) // 60
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        span = f"{days}d {hours}h"
    elif hours:
        span = f"{hours}h {mins}m"
    else:
        span = f"{mins}m"
    return f"{span} ago" if seconds >= 0 else f"in {span}"
