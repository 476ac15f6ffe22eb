"""``kill-switch`` for people."""

from __future__ import annotations

from rich.text import Text

from fleetctl.killswitch import KillSwitchReport


def render(report: KillSwitchReport) -> Text:
    state = "ENGAGED: automation plans and audits, changes nothing" if report.engaged else "released: automation runs"
    line = Text(f"kill switch ({report.parameter}) ")
    line.append(state, style="bold red" if report.engaged else "green")
    if report.changed:
        line.append(f"\nset by {report.by}")
        if report.audited_endpoints:
            line.append(f"; audited on {', '.join(report.audited_endpoints)}")
    next_step = "fleetctl kill-switch release" if report.engaged else "fleetctl kill-switch engage --reason ..."
    line.append(f"\nto change it: {next_step}")
    return line
