"""The pure decision core: parsed alarm + playbook + variant + safety-rail state -> what to do and why.

Nothing here talks to AWS; the responder reads the inputs, calls :func:`decide`, and applies the
plans marked ``go``. Every plan carries a reason, including "did nothing because ...".

Examples
--------
A queue-depth alarm on a primary variant: 180 queued over a threshold of 50 is a breach of x3.6.

>>> from datetime import UTC, datetime
>>> from pathlib import Path
>>> import fleetops
>>> from fleetops.capacity import ScalableTarget
>>> from fleetops.config import VariantConfig
>>> from fleetops.remediation.models import load_playbook
>>> pb = load_playbook(Path(fleetops.__file__).parents[1] / "fleet_config" / "playbook.yaml")
>>> at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
>>> alarm = ParsedAlarm(alarm_name="fleet-remediation-queue-depth-manga-chat-primary", kind="queue-depth",
...     endpoint_name="manga-chat", variant_name="primary", state="ALARM", previous_state="OK",
...     state_timestamp=at.isoformat(), at=at, reason="Threshold Crossed", observed=180.0, threshold=50.0)
>>> variant = VariantConfig(name="primary", capacity_rps_per_instance=4.0, baseline_rps=12.0, floor=2, cap=12)
>>> t = ScalableTarget(min_capacity=2, max_capacity=12)

Target tracking has already taken the variant to 5 instances: the step of +4 counts from those 5, not from
MinCapacity 2 (which would set 6, one more than already serve).

>>> plan = plan_scale_out(alarm, variant, playbook=pb, target=t, serving=5, rails=RailState(), gate=Gate())
>>> plan.status, plan.after
('go', {'min_capacity': 9, 'max_capacity': 12})
>>> plan.reason
'breach x3.60 of the threshold -> step +4 from 5 serving: MinCapacity 2 -> 9'
>>> plan_scale_out(alarm, variant, playbook=pb, target=t, serving=None, rails=RailState(), gate=Gate()).reason
'breach x3.60 of the threshold -> step +4 from MinCapacity 2 (serving count unavailable): MinCapacity 2 -> 6'
>>> rails = RailState(last_scale_out_at=at)
>>> plan_scale_out(alarm, variant, playbook=pb, target=t, serving=5, rails=rails, gate=Gate()).reason
'cooldown: last scale-out 0s ago, cooldown is 300s'
>>> d = decide(alarm, variant, playbook=pb, target=t, serving=5, rails=RailState(), gate=Gate(dry_run=True))
>>> [f"{p.action}: {p.status}" for p in d.plans]
['scale_out: planned', 'notify: go']
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from fleetops.remediation.actions import FLEET_CHANGING, ActionType
from fleetops.remediation.alarm import ParsedAlarm
from fleetops.remediation.rails import RailState

if TYPE_CHECKING:
    from fleetops.capacity import ScalableTarget
    from fleetops.config import VariantConfig
    from fleetops.remediation.models import Playbook
    from fleetops.remediation.watch_window import WatchWindow

#: go: apply now; planned: held back by dry run / kill switch; skipped: a rail or the state says no.
#: A rollback is exempt from the kill switch and the rate limit (see :func:`_plan_rollback`).
PlanStatus = Literal["go", "planned", "skipped"]


class Gate(BaseModel):
    """Switches that hold fleet changes back while still planning and auditing them.

    The kill switch holds forward changes (scale-outs) only; a dry run holds everything. A canary's rollback
    goes ahead under the kill switch (:func:`_plan_rollback`).
    """

    model_config = ConfigDict(frozen=True)

    dry_run: bool = False
    kill_switch: bool = False

    def closed_because(self) -> str | None:
        if self.kill_switch:
            return "kill switch engaged"
        if self.dry_run:
            return "dry run"
        return None


class ActionPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: ActionType
    status: PlanStatus
    reason: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    alarm: ParsedAlarm
    role: Literal["primary", "canary"]
    plans: tuple[ActionPlan, ...]
    #: A primary inside the watch window after its promotion: why (its rollback undoes that promotion).
    watched: str | None = None
    #: What the notification says about the endpoint's last promotion (inside the window or after it).
    watch_note: str | None = None

    def plan(self, action: ActionType) -> ActionPlan | None:
        return next((p for p in self.plans if p.action == action), None)


def plan_scale_out(
    alarm: ParsedAlarm,
    variant: VariantConfig,
    *,
    playbook: Playbook,
    target: ScalableTarget | None,
    serving: int | None,
    rails: RailState,
    gate: Gate,
    already_planned: int = 0,
) -> ActionPlan:
    """Set MinCapacity to the instances serving plus the step for the breach, clamped to [floor, cap].

    Never lowers anything: a result not above the current MinCapacity is skipped.

    Parameters
    ----------
    alarm, variant, playbook
        The transition, the variant's fleet.yaml entry, and the playbook (steps and rails).
    target
        The variant's scalable target; ``None`` (not registered) skips.
    serving
        The instances serving now (DescribeEndpoint's ``CurrentInstanceCount``). The step counts from them
        because target tracking may already run more than MinCapacity, and a step from MinCapacity would then
        add nothing. ``None`` (unknown) steps from MinCapacity, and the reason says so.
    rails, gate, already_planned
        Cooldown and rate-limit memory, the dry-run / kill-switch gate, and fleet changes already planned
        for this alarm.

    The module's example runs it for a queue-depth alarm, without a serving count, and inside the cooldown.
    """
    act = ActionType.SCALE_OUT
    if target is None:
        reason = f"variant {alarm.variant_name!r} of {alarm.endpoint_name!r} has no scalable target registered"
        return ActionPlan(action=act, status="skipped", reason=reason)
    before = {"min_capacity": target.min_capacity, "max_capacity": target.max_capacity}
    if target.min_capacity >= variant.cap:
        reason = f"MinCapacity {target.min_capacity} is already at or above the cap {variant.cap}"
        return ActionPlan(action=act, status="skipped", reason=reason, before=before)
    cooldown = timedelta(seconds=playbook.rails.cooldown_seconds)
    if rails.last_scale_out_at is not None and alarm.at - rails.last_scale_out_at < cooldown:
        ago = int((alarm.at - rails.last_scale_out_at).total_seconds())
        reason = f"cooldown: last scale-out {ago}s ago, cooldown is {playbook.rails.cooldown_seconds}s"
        return ActionPlan(action=act, status="skipped", reason=reason, before=before)
    limited = _rate_limited(alarm.at, rails, playbook, already_planned)
    if limited:
        return ActionPlan(action=act, status="skipped", reason=limited, before=before)
    step = playbook.step_for(alarm.breach)
    base = serving if serving is not None else target.min_capacity
    source = f"{serving} serving" if serving is not None else f"MinCapacity {base} (serving count unavailable)"
    new_min = min(variant.cap, max(variant.floor, base + step))
    breach = f"breach x{alarm.breach:.2f} of the threshold -> step +{step} from {source}"
    if new_min <= target.min_capacity:
        reason = f"{breach}: {new_min} is not above MinCapacity {target.min_capacity}, nothing to raise"
        return ActionPlan(action=act, status="skipped", reason=reason, before=before)
    after = {"min_capacity": new_min, "max_capacity": max(target.max_capacity, new_min)}
    clamp = f", clamped to cap {variant.cap}" if base + step > variant.cap else ""
    reason = f"{breach}: MinCapacity {target.min_capacity} -> {new_min}{clamp}"
    return _gated(act, reason, gate, before=before, after=after)


def _gated(act: ActionType, reason: str, gate: Gate, **change: dict[str, Any] | None) -> ActionPlan:
    """``go``, or only ``planned`` (saying what it would do) while the kill switch or dry run holds it."""
    held = gate.closed_because()
    if held:
        return ActionPlan(action=act, status="planned", reason=f"{held}: would {reason}", **change)
    return ActionPlan(action=act, status="go", reason=reason, **change)


def _rate_limited(now: datetime, rails: RailState, playbook: Playbook, already_planned: int) -> str | None:
    done = rails.actions_since(now - timedelta(hours=1)) + already_planned
    if done >= playbook.rails.max_actions_per_hour:
        return f"rate limit: {done} fleet changes in the last hour, at most {playbook.rails.max_actions_per_hour}"
    return None


def _plan_rollback(
    alarm: ParsedAlarm,
    role: str,
    *,
    playbook: Playbook,
    rails: RailState,
    gate: Gate,
    planned: int,
    watched: str | None = None,
) -> ActionPlan:
    """A rollback is a retreat: neither the rate limit nor the kill switch holds it back.

    Both exist to stop automation pushing the fleet forward; a skipped rollback is never retried (the alarm
    stays in ALARM, so no new event comes) while the canary keeps its traffic, which is exactly during a load
    incident, when scale-outs have used the hour's changes. Only a dry run, which changes nothing, plans it.
    A canary's rollback aborts its rollout; a primary's, only inside its watch window (``watched``), undoes
    the promotion: the previous release comes back.
    """
    act = ActionType.ROLLBACK
    if role == "canary":
        reason = f"canary {alarm.variant_name!r} in trouble ({alarm.kind}): roll back"
    elif watched:
        reason = f"{watched}, {alarm.kind} alarm: roll back to the previous release"
    else:
        why = f"variant {alarm.variant_name!r} is not a canary and not inside a watch window after a promotion"
        return ActionPlan(action=act, status="skipped", reason=why)
    if gate.dry_run:
        return ActionPlan(action=act, status="planned", reason=f"dry run: would {reason}")
    overridden = [
        why
        for why in (
            "kill switch engaged" if gate.kill_switch else None,
            _rate_limited(alarm.at, rails, playbook, planned),
        )
        if why
    ]
    if overridden:
        reason += f" (a retreat, so it goes ahead despite: {'; '.join(overridden)})"
    return ActionPlan(action=act, status="go", reason=reason)


def decide(
    alarm: ParsedAlarm,
    variant: VariantConfig,
    *,
    playbook: Playbook,
    target: ScalableTarget | None,
    serving: int | None,
    rails: RailState,
    gate: Gate,
    watch: WatchWindow | None = None,
) -> Decision:
    """Map an alarm transition to action plans per the playbook and the safety rails.

    ALARM runs the kind's ``on_alarm`` actions for the variant's role (a scale-out steps from ``serving``,
    see :func:`plan_scale_out`); on a primary whose alarm fired inside ``watch`` (the window after the
    endpoint's last promotion), the kind's ``promoted`` actions instead. OK runs ``on_ok`` (recording the
    recovery; the playbook forbids scaling in there); INSUFFICIENT_DATA does nothing. The module's example runs
    it in dry run.
    """
    spec = playbook.alarms[alarm.kind]
    if alarm.state == "OK":
        since = f" (was {alarm.previous_state})" if alarm.previous_state else ""
        plans = tuple(ActionPlan(action=a, status="go", reason=f"recovered{since}: {alarm.reason}") for a in spec.on_ok)
        return Decision(alarm=alarm, role=variant.role, plans=plans)
    if alarm.state != "ALARM":
        return Decision(alarm=alarm, role=variant.role, plans=())
    # Only the kinds that say what a watched primary does (``promoted``) look at the last promotion.
    on_primary = variant.role == "primary" and watch is not None and spec.on_alarm.promoted is not None
    watched = watch.reason(alarm.at) if on_primary and watch is not None else None
    note = watch.note(alarm.at) if on_primary and watch is not None else None
    planned: list[ActionPlan] = []
    for action in spec.on_alarm.for_role(variant.role, watched=watched is not None):
        changing = sum(1 for p in planned if p.action in FLEET_CHANGING and p.status == "go")
        if action == ActionType.SCALE_OUT:
            planned.append(
                plan_scale_out(
                    alarm,
                    variant,
                    playbook=playbook,
                    target=target,
                    serving=serving,
                    rails=rails,
                    gate=gate,
                    already_planned=changing,
                )
            )
        elif action == ActionType.ROLLBACK:
            planned.append(
                _plan_rollback(
                    alarm, variant.role, playbook=playbook, rails=rails, gate=gate, planned=changing, watched=watched
                )
            )
        else:
            planned.append(ActionPlan(action=action, status="go", reason=spec.summary))
    return Decision(alarm=alarm, role=variant.role, plans=tuple(planned), watched=watched, watch_note=note)
