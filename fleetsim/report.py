"""What each run cost and what users saw: the numbers, a table for people, a plot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from fleetsim.fleet import FleetParams, Minute
from fleetsim.traffic import TICK, Trace, Window

#: How long after an unpredicted spike starts its cost is still counted (capacity may arrive late).
SPIKE_TAIL = timedelta(minutes=30)
#: How many minutes back a spike's first minute is compared with the ordinary traffic before it.
ONSET_LOOKBACK_MINUTES = 10


@dataclass(frozen=True)
class Summary:
    requests: int
    failed: int
    failed_pct: float
    failed_on_calendar_events: int
    failed_pct_on_calendar_events: float
    failed_in_unpredicted_spikes: int
    minutes_degraded: int
    worst_queue_wait_s: float
    spike_to_capacity_s: float | None  # the slowest unpredicted spike -> first instance added; None: none added
    # The slowest unpredicted spike -> the first minute asking for more instances (desired above the spike's
    # first minute's), whenever they arrive; None: no spike, or one with no request within it and SPIKE_TAIL.
    spike_to_first_capacity_request_s: float | None
    # The slowest unpredicted spike from its first minute the fleet fell short (requests left queued or failed)
    # to that first request; 0 where no spike fell short; None: no spike, or one short with no request.
    shortfall_to_first_capacity_request_s: float | None
    instance_hours: float
    cost_usd: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def inside(minute: Minute, spans: Sequence[Window], tail: timedelta = timedelta(0)) -> bool:
    return any(w.start <= minute.at < w.end + tail for w in spans)


def _spike_to_capacity_s(minutes: Sequence[Minute], spikes: Sequence[Window]) -> float | None:
    slowest: float | None = None
    for spike in spikes:
        during = [m for m in minutes if spike.start <= m.at < spike.end + SPIKE_TAIL]
        if not during:
            continue
        raised = next((m for m in during if m.serving > during[0].serving), None)
        if raised is None:
            return None
        seconds = (raised.at - spike.start).total_seconds()
        slowest = seconds if slowest is None else max(slowest, seconds)
    return slowest


def spike_first_requests_s(minutes: Sequence[Minute], spikes: Sequence[Window]) -> list[tuple[Window, float | None]]:
    """Per unpredicted spike with minutes in ``minutes``: its start -> the first minute asking for more instances
    (desired above the spike's first minute's), whenever they arrive; None: no request within it and SPIKE_TAIL."""
    found: list[tuple[Window, float | None]] = []
    for spike in spikes:
        during = [m for m in minutes if spike.start < m.at + TICK and m.at < spike.end + SPIKE_TAIL]
        if not during:
            continue
        asked = next((m for m in during if m.desired > during[0].desired), None)
        found.append((spike, None if asked is None else max(0.0, (asked.at - spike.start).total_seconds())))
    return found


def _spike_to_first_request_s(minutes: Sequence[Minute], spikes: Sequence[Window]) -> float | None:
    delays = [delay for _, delay in spike_first_requests_s(minutes, spikes)]
    if None in delays:
        return None
    return max((d for d in delays if d is not None), default=None)


def load_vs_before(minutes: Sequence[Minute], index: int, lookback: int = ONSET_LOOKBACK_MINUTES) -> float | None:
    """``minutes[index]``'s arrivals per serving instance over the busiest such minute of the ``lookback`` minutes
    before it; None without such minutes or traffic in them.

    For a spike's first minute: at or under 1, that minute loaded the fleet no more than a minute of the ordinary
    traffic just before it, and a rule on load alone that asked for capacity after it would have asked before
    the spike as well, on noise.
    """
    busiest = max((m.invocations_per_instance for m in minutes[max(0, index - lookback) : index]), default=0.0)
    return minutes[index].invocations_per_instance / busiest if busiest > 0 else None


def _shortfall_to_first_request_s(minutes: Sequence[Minute], spikes: Sequence[Window]) -> float | None:
    slowest: float | None = None
    for spike in spikes:
        during = [m for m in minutes if spike.start < m.at + TICK and m.at < spike.end + SPIKE_TAIL]
        short = next((i for i, m in enumerate(during) if m.queued > 0 or m.failed), None)
        if short is None:  # the fleet served it all: nothing to wait for
            slowest = slowest or 0.0
            continue
        asked = next((m for m in during[short + 1 :] if m.desired > during[short].desired), None)
        if asked is None:
            return None
        seconds = (asked.at - during[short].at).total_seconds()
        slowest = seconds if slowest is None else max(slowest, seconds)
    return slowest


def summarize(
    minutes: Sequence[Minute],
    trace: Trace,
    params: FleetParams,
    price: float | None,
    *,
    since: datetime | None = None,
) -> Summary:
    """What ``minutes`` cost and what users saw; from ``since`` on only when given (the judged week of a scenario).

    Calendar events and unpredicted spikes are the trace's windows (those that end before ``since`` count for
    nothing, their minutes being left out).
    """
    if since is not None:
        minutes = [m for m in minutes if m.at >= since]
    events = [w for w in trace.windows if w.predicted]
    spikes = [w for w in trace.windows if not w.predicted]
    requests = sum(m.arrived for m in minutes)
    failed = sum(m.failed for m in minutes)
    on_events = [m for m in minutes if inside(m, events)]
    event_requests = sum(m.arrived for m in on_events)
    event_failed = sum(m.failed for m in on_events)
    hours = sum(m.billed for m in minutes) / 60
    return Summary(
        requests=requests,
        failed=failed,
        failed_pct=round(100 * failed / requests, 4) if requests else 0.0,
        failed_on_calendar_events=event_failed,
        failed_pct_on_calendar_events=round(100 * event_failed / event_requests, 4) if event_requests else 0.0,
        failed_in_unpredicted_spikes=sum(m.failed for m in minutes if inside(m, spikes, SPIKE_TAIL)),
        minutes_degraded=sum(1 for m in minutes if m.failed or m.wait_s > params.degraded_wait_s),
        worst_queue_wait_s=round(max((m.wait_s for m in minutes), default=0.0), 1),
        spike_to_capacity_s=_spike_to_capacity_s(minutes, spikes),
        spike_to_first_capacity_request_s=_spike_to_first_request_s(minutes, spikes),
        shortfall_to_first_capacity_request_s=_shortfall_to_first_request_s(minutes, spikes),
        instance_hours=round(hours, 2),
        cost_usd=round(hours * price, 2) if price is not None else None,
    )


def windows(trace: Trace) -> list[str]:
    """One line per calendar event and unpredicted spike the trace holds."""
    lines = []
    for w in trace.windows:
        kind = "calendar" if w.predicted else "UNPREDICTED"
        lines.append(f"  {kind:<11} {w.start:%a %m-%d %H:%M} UTC  x{w.multiplier:g}  {w.name}")
    return lines


def vs_oracle(summaries: Mapping[str, Summary], name: str, oracle: str = "oracle") -> float | None:
    """``name``'s billed instance-hours over the oracle's (1.0: no more than needed); None without an oracle."""
    base = summaries.get(oracle)
    if base is None or not base.instance_hours:
        return None
    return summaries[name].instance_hours / base.instance_hours


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f} s" if seconds < 600 else f"{seconds / 60:.0f} min"  # seconds where a minute matters


def table(summaries: Mapping[str, Summary], oracle: str = "oracle") -> str:
    """One row per policy, for a terminal."""
    header = (
        f"{'policy':<10} {'failed':>8} {'failed %':>9} {'on events %':>12} {'in spikes':>10} {'degraded min':>13} "
        f"{'worst wait':>11} {'spike->ask':>11} {'spike->cap':>11} {'inst-hours':>11} {'cost':>10} {'vs oracle':>10}"
    )
    lines = [header, "-" * len(header)]
    for name, s in summaries.items():
        cost = "-" if s.cost_usd is None else f"${s.cost_usd:,.0f}"
        hours = vs_oracle(summaries, name, oracle)
        ratio = "-" if hours is None else f"x{hours:.3f}"
        asked, added = _duration(s.spike_to_first_capacity_request_s), _duration(s.spike_to_capacity_s)
        lines.append(
            f"{name:<10} {s.failed:>8,} {s.failed_pct:>9.3f} {s.failed_pct_on_calendar_events:>12.3f} "
            f"{s.failed_in_unpredicted_spikes:>10,} {s.minutes_degraded:>13,} {s.worst_queue_wait_s:>10.0f}s "
            f"{asked:>11} {added:>11} {s.instance_hours:>11,.1f} {cost:>10} {ratio:>10}"
        )
    return "\n".join(lines)


def plot(runs: Mapping[str, Sequence[Minute]], trace: Trace, path: Path, title: str) -> Path:
    """Traffic (with calendar events and unpredicted spikes shaded), the capacity it needed, each policy's capacity."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server or in CI
    import matplotlib.pyplot as plt

    times = [trace.time(i) for i in range(len(trace))]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(14, 7), sharex=True, height_ratios=[1, 1.3])
    top.plot(times, [r / 60 for r in trace.requests], color="black", linewidth=0.6, label="traffic (requests/s)")
    for window in trace.windows:
        colour = "tab:green" if window.predicted else "tab:red"
        for axis in (top, bottom):
            axis.axvspan(window.start, window.end, color=colour, alpha=0.12, linewidth=0)
    top.set_ylabel("requests/s")
    top.set_title(title)
    top.legend(loc="upper left")
    styles = {"oracle": ("tab:gray", 0.5), "reactive": ("tab:orange", 1.2), "project": ("tab:blue", 1.2)}
    for name, minutes in runs.items():
        colour, width = styles.get(name, ("tab:purple", 1.2))
        label = "oracle (the capacity each minute needed)" if name == "oracle" else name
        bottom.step(times, [m.serving for m in minutes], where="post", color=colour, linewidth=width, label=label)
        failed = [(m.at, m.serving) for m in minutes if m.failed]
        if failed:
            bottom.scatter(*zip(*failed, strict=True), color=colour, marker="x", s=12, label=f"{name}: failed requests")
    bottom.set_ylabel("instances serving")
    bottom.legend(loc="upper left", ncols=3)
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
