"""``status`` for people."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from fleetctl import timefmt
from fleetctl.rollout_progress import RolloutProgress
from fleetctl.status import EndpointStatus
from fleetctl.views.common import flag, section, table


def _bounds(low: int | None, high: int | None) -> str:
    return "-" if low is None or high is None else f"{low}..{high}"


def _rollout_line(rollout: RolloutProgress) -> Text:
    weights = " → ".join(f"{s.weight}%{'*' if s.approval else ''}" for s in rollout.steps) or "?"
    at = f"{rollout.step_weight}%" if rollout.step_weight is not None else "not yet on traffic"
    if rollout.history_unreadable:  # the variants' weights above still say where users are
        at = f"? ({rollout.history_unreadable})"
    line = Text(f"{rollout.rollout_id} ({rollout.model_version or '?'}): canary at {at}, state {rollout.state}")
    line.append(f"\n  steps {weights}   (* = approval)")
    if rollout.waiting_for_approval:
        line.append(
            f"\n  waiting for approval: fleetctl rollout approve {rollout.rollout_id}  |  reject / abort",
            style="bold yellow",
        )
    return line


def render(report: EndpointStatus) -> RenderableType:
    now = report.now
    head = Text()
    head.append(report.endpoint, style="bold")
    head.append(f"  {report.endpoint_status}", style="green" if report.endpoint_status == "InService" else "yellow")
    head.append(f"  config {report.endpoint_config_name}  stack {report.stack} ({report.environment or '?'})")
    head.append(f"  at {timefmt.utc(now)}")

    switches = Text("kill switch: ")
    switches.append_text(flag(report.kill_switch_engaged, "ENGAGED (automation changes nothing)", "released"))
    switches.append("   dry run: ")
    switches.append_text(flag(report.dry_run, "ON (automation plans only)", "off"))
    for label, lease in (("config lease", report.lease), ("capacity lease", report.capacity_lease)):
        switches.append(f"   {label}: ")
        if lease is None or lease.expired:
            switches.append("free")
        else:
            switches.append(f"{lease.holder} until {timefmt.utc(lease.expires_at)}", style="yellow")

    pointer = report.model_pointer
    model = Text("model: ")
    if pointer is None:
        model.append("no pointer recorded (no rollout has promoted a version yet)")
    else:
        model.append(f"{pointer.model} {pointer.version} on {pointer.endpoint_config_name}")
        if pointer.previous_endpoint_config_name:
            model.append(f"; rollback returns to {pointer.previous_endpoint_config_name}")
            model.append(f" ({pointer.previous_version})" if pointer.previous_version else "")
        if pointer.adapters:
            model.append("\nadapters: " + ", ".join(f"{n} {v}" for n, v in sorted(pointer.adapters.items())))
            back = _adapters_back(pointer.adapters, pointer.previous_adapters or {})
            model.append(f"; rollback returns to {back}" if back and pointer.previous_endpoint_config_name else "")

    variants = table("variant", "traffic", "instances", "min..max", "instance type", "model")
    for v in report.variants:
        variants.add_row(
            v.name,
            f"{v.traffic_percent:g} %",
            str(v.instances),
            _bounds(v.min_capacity, v.max_capacity),
            v.instance_type,
            v.model_name,
        )

    actions: RenderableType = Text("none scheduled")
    if report.upcoming_actions:
        actions = grid = table("when (UTC)", "local", "variant", "min..max", "reason")
        for a in report.upcoming_actions:
            when = f"{timefmt.utc(a.at)} ({timefmt.ago(a.at, now)})" if a.at else a.schedule
            local = timefmt.local(a.at, a.timezone) if a.at else a.timezone
            grid.add_row(when, local, a.variant, f"{a.min_capacity}..{a.max_capacity}", a.reason or f"({a.name})")

    alarms: RenderableType = Text("none")
    if report.alarms_in_alarm:
        alarms = listed = table("alarm", "variant", "since", "reason")
        for alarm in report.alarms_in_alarm:
            since = timefmt.ago(alarm.since, now) if alarm.since else "?"
            listed.add_row(alarm.name, alarm.variant or "-", since, alarm.reason)

    rollouts: RenderableType = (
        Group(*(_rollout_line(r) for r in report.rollouts)) if report.rollouts else Text("none in flight")
    )
    return Group(
        head,
        switches,
        model,
        Text(""),
        variants,
        Text(""),
        section("next scheduled actions", actions),
        section("alarms in ALARM", alarms),
        section("rollout", rollouts),
    )


def _adapters_back(adapters: dict[str, str], previous: dict[str, str]) -> str:
    """The adapters a rollback would change, at the version it returns them to ("none": it drops one)."""
    names = sorted(n for n in set(adapters) | set(previous) if adapters.get(n) != previous.get(n))
    return ", ".join(f"{n} {previous.get(n, 'none')}" for n in names)
