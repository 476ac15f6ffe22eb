"""``fleetctl traffic export``: a variant's own traffic from CloudWatch, as the CSV ``fleetctl simulate --trace``
replays.

The capacity policy is judged best on the traffic it will meet, and that is the endpoint's own. The export reads
it with the pre-scale reconciler's own reader (:class:`~fleetops.prescale.demand_history.DemandHistory`:
SageMaker's per-variant ``Invocations``, Sum, five-minute periods), so the replay starts from what the reconciler
itself reads: a period after the first datapoint with none is a period without invocations (0), as the
reconciler counts it, and the file starts at the first datapoint. CloudWatch keeps five-minute datapoints for 63
days: older traffic cannot be exported.

The calendar table's entries (one-off releases) are not in fleet.yaml, which the simulator plans from: with the
stack named, they are written beside the traffic as the YAML list ``--calendar`` reads, so that the replay plans
for the releases the reconciler planned for.
"""

from __future__ import annotations

import csv
import shlex
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel

from fleetctl.errors import CliError, ExitCode
from fleetops.prescale.forecast import SLOT, SLOT_S, WEEK

if TYPE_CHECKING:
    from fleetops.prescale.demand_history import DemandHistory

#: CloudWatch's retention of five-minute datapoints.
MAX_DAYS = 63
#: With at least this much traffic the replay judges its last week on the weeks before (as the reconciler reads
#: them); with less it plays the whole file as a new endpoint's first days.
HISTORY_FOR_JUDGING = 2 * WEEK


class TrafficExport(BaseModel):
    """What was written, and how to replay it."""

    endpoint: str
    variant: str
    path: str
    first: datetime  # the first period with a datapoint
    end: datetime  # the end of the last whole period read
    rows: int
    requests: int
    periods_without_requests: int  # no datapoint, or 0: both written as 0, as the reconciler reads them
    calendar_path: str | None  # the calendar table's entries (None: no stack named, none written)
    calendar_entries: int
    judge_from: datetime | None  # the last week's start, when the file holds two weeks or more
    replay: str  # the command that replays the file


def export(
    endpoint: str,
    variant: str,
    days: int,
    now: datetime,
    path: Path,
    history: DemandHistory,
    calendar: tuple[Path, Sequence[dict[str, Any]]] | None = None,
) -> TrafficExport:
    """Write ``variant``'s requests per five-minute period over the ``days`` before ``now`` to ``path``, and the
    calendar table's ``calendar`` entries to their path when given.

    Raises
    ------
    CliError
        ``USAGE`` for ``days`` outside 1..63; ``NOT_FOUND`` when CloudWatch holds no invocation of the variant in
        that time (a wrong name, or an endpoint without traffic): no file is written then.
    """
    if not 1 <= days <= MAX_DAYS:
        raise CliError(
            ExitCode.USAGE,
            f"--days {days}: CloudWatch keeps five-minute datapoints for {MAX_DAYS} days",
            f"pass --days between 1 and {MAX_DAYS}",
        )
    series = history.invocations(endpoint, variant, now - timedelta(days=days), now)
    first = next((i for i, rps in enumerate(series.rps) if rps is not None), None)
    if first is None:
        raise CliError(
            ExitCode.NOT_FOUND,
            f"no Invocations of {endpoint}/{variant} in CloudWatch over the last {days} days",
            "check the endpoint and variant names (fleetctl status) and the region; nothing was written",
        )
    rows = [(series.start + i * SLOT, round((rps or 0.0) * SLOT_S)) for i, rps in enumerate(series.rps) if i >= first]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("time", "requests"))
        writer.writerows((f"{at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}", count) for at, count in rows)
    start, end = rows[0][0], series.end
    judge_from = end - WEEK if end - start >= HISTORY_FOR_JUDGING else None
    replay = f"fleetctl simulate --trace {shlex.quote(str(path))} --endpoint {shlex.quote(endpoint)}"
    if calendar is not None:
        calendar[0].write_text(yaml.safe_dump(list(calendar[1]), sort_keys=True, allow_unicode=True), encoding="utf-8")
        replay += f" --calendar {shlex.quote(str(calendar[0]))}"
    if judge_from is not None:
        replay += f" --judge-from {judge_from:%Y-%m-%dT%H:%M:%SZ}"
    return TrafficExport(
        endpoint=endpoint,
        variant=variant,
        path=str(path),
        first=start,
        end=end,
        rows=len(rows),
        requests=sum(count for _, count in rows),
        periods_without_requests=sum(1 for rps in series.rps[first:] if not rps),
        calendar_path=str(calendar[0]) if calendar else None,
        calendar_entries=len(calendar[1]) if calendar else 0,
        judge_from=judge_from,
        replay=replay,
    )
