"""``traffic export`` for people."""

from __future__ import annotations

from rich.text import Text

from fleetctl.traffic import TrafficExport


def render(report: TrafficExport, primary: str | None) -> Text:
    """``primary``: the variant of fleet.yaml the simulator sizes (None: the endpoint is not in fleet.yaml)."""
    lines = [
        f"{report.path}: {report.endpoint}/{report.variant}, {report.rows} five-minute rows from "
        f"{report.first:%Y-%m-%d %H:%M} to {report.end:%Y-%m-%d %H:%M} UTC, {report.requests} requests",
        f"{report.periods_without_requests} periods without requests (no datapoint in CloudWatch: written as 0, as "
        "the reconciler reads them)",
    ]
    if report.calendar_path:
        lines.append(f"{report.calendar_path}: the calendar table's {report.calendar_entries} entries")
    else:
        lines.append("no stack named: the calendar table's one-off releases are not in the replay (--stack)")
    if report.judge_from is None:
        lines.append("under two weeks: the replay plays it all as a new endpoint's first days")
    else:
        since = f"{report.judge_from:%Y-%m-%d %H:%M} UTC"
        lines.append(f"the replay judges the last week, from {since}, on the weeks before it")
    if primary is None:
        lines.append("the endpoint is not in this fleet.yaml: pass the simulator --fleet with the one that lists it")
    elif primary != report.variant:
        lines.append(f"the simulator sizes fleet.yaml's primary variant, {primary}, for this traffic")
    lines.append(f"replay: {report.replay}")
    return Text("\n".join(lines))
