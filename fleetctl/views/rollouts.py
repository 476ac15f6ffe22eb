"""``rollout`` and ``rollback`` for people."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from fleetctl import timefmt
from fleetctl.rollout_progress import RolloutProgress
from fleetctl.rollouts import Decision, RollbackRun, RolloutDetail, RolloutList
from fleetctl.views.common import table

_STATUS_STYLE = {"RUNNING": "yellow", "SUCCEEDED": "green"}


def progress_lines(rollout: RolloutProgress) -> Text:
    text = Text()
    text.append(f"rollout {rollout.rollout_id}", style="bold")
    text.append(f"  {rollout.status}", style=_STATUS_STYLE.get(rollout.status, "bold red"))
    text.append(f"  {rollout.endpoint_name}  model {rollout.model_version or '?'}  by {rollout.requested_by or '?'}")
    text.append(f"\n  started {timefmt.utc(rollout.started_at)}")
    if rollout.stopped_at:
        text.append(f", ended {timefmt.utc(rollout.stopped_at)}")
    steps = " → ".join(
        f"[{s.weight}%{'*' if s.approval else ''}]"
        if s.weight == rollout.step_weight
        else f"{s.weight}%" + ("*" if s.approval else "")
        for s in rollout.steps
    )
    text.append(f"\n  steps {steps or '?'}   (* = approval, [ ] = where the canary is)")
    text.append(f"\n  state {rollout.state or '?'}")
    if rollout.history_unreadable:
        text.append(f"\n  state and step unknown: {rollout.history_unreadable}", style="yellow")
    if rollout.last_analysis:
        text.append(f"\n  last analysis: {rollout.last_analysis}")
    if rollout.error:
        text.append(f"\n  {rollout.error}: {rollout.cause or ''}", style="bold red")
    return text


def render_detail(detail: RolloutDetail) -> RenderableType:
    parts: list[RenderableType] = [progress_lines(detail.rollout)]
    pending = detail.pending_approval
    if pending is not None:
        parts.append(
            Text(
                f"  waiting for approval before {pending.step_weight}% until {timefmt.utc(pending.expires_at)}\n"
                f"  decide: fleetctl rollout approve {detail.rollout.rollout_id}   |   "
                f"fleetctl rollout reject {detail.rollout.rollout_id} --reason ...",
                style="bold yellow",
            )
        )
    elif detail.approval_unreadable:
        parts.append(Text(f"  pending approval unknown: {detail.approval_unreadable}", style="yellow"))
    if pending is None and detail.rollout.status == "RUNNING":
        parts.append(Text(f"  stop it: fleetctl rollout abort {detail.rollout.rollout_id} --reason ..."))
    return Group(*parts)


def render_list(listing: RolloutList) -> RenderableType:
    parts: list[RenderableType] = [Text(f"rollouts of stack {listing.stack}", style="bold underline")]
    parts += [progress_lines(r) for r in listing.running] or [Text("none in flight")]
    if listing.recent:
        recent = table("recent rollout", "status")
        for item in listing.recent:
            recent.add_row(item["rollout_id"], item["status"])
        parts += [Text(""), recent]
    return Group(*parts)


def render_decision(decision: Decision) -> RenderableType:
    done = "approved" if decision.decision == "approve" else "rejected (the rollout rolls back)"
    head = Text(
        f"{done}: rollout {decision.rollout_id} on {decision.endpoint_name} at {decision.step_weight}%, "
        f"by {decision.decided_by}",
        style="bold",
    )
    return Group(head, progress_lines(decision.rollout))


def render_rollback(run: RollbackRun) -> RenderableType:
    text = Text()
    what = f"abort of rollout {run.aborted_rollout}" if run.aborted_rollout else "rollback"
    text.append(f"{what} on {run.endpoint_name}: {run.rollback_id}", style="bold")
    text.append(f"  {run.status}", style=_STATUS_STYLE.get(run.status, "bold red"))
    text.append(f"\n  state {run.state or '?'}")
    if run.error:
        text.append(f"\n  {run.error}: {run.cause or ''}", style="bold red")
    if run.status == "RUNNING":
        text.append(f"\n  it goes on; see the endpoint with: fleetctl status {run.endpoint_name}")
    else:
        text.append(f"\n  what it did: fleetctl why {run.endpoint_name} --since 1h")
    return text
