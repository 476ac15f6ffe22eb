"""Put it together: the fleet file, playbook and template in; reactive, project and oracle runs of one trace out."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fleetops import SHIPPED_CONFIG_DIR
from fleetops.calendar import CalendarEntry, InvalidEntry
from fleetops.capacity import instances_for
from fleetops.config import EndpointConfig, FleetConfig, VariantConfig, load_fleet_config
from fleetops.prescale.reconciler import load_calendar
from fleetops.remediation.models import Playbook, load_playbook
from fleetsim import stack
from fleetsim.fleet import FleetParams, Minute, Scaler, run
from fleetsim.history import SimulatedHistory
from fleetsim.policies import AlarmResponse, CalendarPrescale, Combined, TargetTracking
from fleetsim.rollout import Rollout, RolloutRun, run_rollout
from fleetsim.traffic import TICK, TICK_S, Trace

CONFIG_DIR = SHIPPED_CONFIG_DIR
FLEET = CONFIG_DIR / "fleet.yaml"
PLAYBOOK = CONFIG_DIR / "playbook.yaml"
POLICIES = ("reactive", "project", "oracle")


class SetupError(ValueError):
    """The simulation cannot start: unknown endpoint, invalid extra calendar entries, a template without a policy."""


@dataclass(frozen=True)
class Setup:
    """Everything a run needs, read from the project's own files."""

    config: FleetConfig
    endpoint: EndpointConfig
    variant: VariantConfig
    playbook: Playbook
    tracking: tuple[stack.TargetTrackingSpec, ...]  # the variant's target-tracking policies
    prescale_interval_s: int
    params: FleetParams
    one_off_rows: tuple[dict[str, Any], ...] = ()

    def calendar(self) -> tuple[list[CalendarEntry], list[InvalidEntry]]:
        return load_calendar(self.config, list(self.one_off_rows))

    def tuned(self, *, variant: dict[str, Any] | None = None, prescale: dict[str, Any] | None = None) -> Setup:
        """The same setup with some of the variant's fields (cap, headroom) or the pre-scale settings changed,
        everywhere the policies read them (a sweep's or a scenario's what-if; fleet.yaml is not touched)."""
        tuned_variant = self.variant.model_copy(update=variant or {})
        variants = tuple(tuned_variant if v.name == self.variant.name else v for v in self.endpoint.variants)
        endpoint = self.endpoint.model_copy(update={"variants": variants})
        endpoints = tuple(endpoint if e.name == endpoint.name else e for e in self.config.endpoints)
        settings = self.config.prescale.model_copy(update=prescale or {})
        config = self.config.model_copy(update={"endpoints": endpoints, "prescale": settings})
        return replace(self, config=config, endpoint=endpoint, variant=tuned_variant)


def load_setup(
    endpoint_name: str,
    *,
    fleet: Path = FLEET,
    playbook: Path = PLAYBOOK,
    template: Path = stack.TEMPLATE,
    one_off_rows: Sequence[dict[str, Any]] = (),
    provisioning_s: tuple[int, int] | None = None,
    container_ready_s: int | None = None,
) -> Setup:
    """Read the fleet, playbook and template for ``endpoint_name``'s primary variant.

    Raises
    ------
    SetupError
        For an endpoint not in the fleet file, extra calendar entries that do not validate, or a variant the
        template gives no target-tracking policy.
    """
    config = load_fleet_config(fleet)
    endpoint = config.endpoint(endpoint_name)
    if endpoint is None:
        known = ", ".join(sorted(config.endpoint_names()))
        raise SetupError(f"endpoint {endpoint_name!r} is not in {fleet} (it has: {known})")
    variant = next(v for v in endpoint.variants if v.role == "primary")
    tracking = stack.target_tracking(endpoint.name, variant.name, template)
    if not tracking:
        raise SetupError(f"{template} declares no target-tracking policy for {endpoint.name}/{variant.name}")
    params = FleetParams(capacity_rps_per_instance=variant.capacity_rps_per_instance)
    if provisioning_s is not None:
        params = replace(params, provisioning_s=provisioning_s)
    if container_ready_s is not None:
        params = replace(params, container_ready_s=container_ready_s)
    setup = Setup(
        config=config,
        endpoint=endpoint,
        variant=variant,
        playbook=load_playbook(playbook),
        tracking=tracking,
        prescale_interval_s=stack.prescale_interval_s(template),
        params=params,
        one_off_rows=tuple(one_off_rows),
    )
    invalid = [e for e in setup.calendar()[1] if e.source == "calendar-table"]
    if invalid:
        lines = "; ".join(f"{e.name}: {', '.join(e.errors)}" for e in invalid)
        raise SetupError(f"invalid extra calendar entries: {lines}")
    return setup


def make_policy(name: str, setup: Setup, history: SimulatedHistory | None = None) -> Combined:
    """``reactive`` or ``project``; the project's reconciler reads ``history`` (None: configured levels only)."""
    tracking = TargetTracking(*setup.tracking, request_seconds=setup.params.request_seconds)
    if name == "reactive":
        return Combined("reactive", [tracking])
    if name == "project":
        prescale = CalendarPrescale(
            setup.config, setup.endpoint, setup.one_off_rows, setup.prescale_interval_s, history=history
        )
        responder = AlarmResponse(
            setup.playbook,
            setup.endpoint.name,
            setup.variant,
            plan_level=lambda: prescale.plan_level() or setup.variant.floor,
        )
        return Combined("project", [prescale, tracking, responder])
    raise ValueError(f"unknown policy {name!r}; known: {POLICIES}")


def oracle(trace: Trace, setup: Setup) -> list[Minute]:
    """The least capacity that serves every minute's requests within the minute, knowing the future.

    It launches each instance exactly the fastest possible provisioning time before it is needed and removes
    it the minute it is not, so no policy that serves every minute in time is billed for fewer instance-hours.
    It keeps the variant's floor (availability, not load) and ignores its cap (it says what was needed).
    """
    per_instance = setup.params.per_instance_per_tick
    need = [max(setup.variant.floor, math.ceil(round(a / per_instance, 9))) for a in trace.requests]
    # Launched at the start of minute ``tick``, an instance serves the whole of minute ``tick + lead``.
    lead = math.ceil(setup.params.fastest_arrival_s / TICK_S)
    minutes = []
    for tick, arrived in enumerate(trace.requests):
        billed = max(need[tick : tick + lead + 1])
        minutes.append(
            Minute(
                at=trace.time(tick),
                arrived=arrived,
                served=arrived,
                failed=0,
                queued=0.0,
                wait_s=0.0,
                serving=need[tick],
                billed=billed,
                desired=billed,
                min_capacity=setup.variant.floor,
            )
        )
    return minutes


def judged(trace: Trace, judge_from: datetime | None) -> Trace:
    """The part of ``trace`` the policies are run and judged on: from ``judge_from`` (whole minutes) to the end."""
    if judge_from is None:
        return trace
    skip = math.ceil((judge_from - trace.start) / TICK)
    if not 0 <= skip < len(trace):
        raise SetupError(f"judge_from {judge_from.isoformat()} is outside the trace")
    start = trace.time(skip)
    windows = tuple(w for w in trace.windows if w.end > start)
    return Trace(start, trace.requests[skip:], windows)


def starting_instances(trace: Trace, judge_from: Trace, setup: Setup) -> int:
    """Instances serving when the judged part starts: the configured baseline's, or, with an hour of history
    before it, what that hour's mean rate needed (the same for every policy)."""
    before = trace.requests[max(0, len(trace) - len(judge_from) - 60) : len(trace) - len(judge_from)]
    if len(before) < 60:
        return instances_for(setup.variant, 1.0)
    rps = sum(before) / len(before) / TICK_S
    return instances_for(setup.variant, rps / setup.variant.baseline_rps) if setup.variant.baseline_rps else 1


@dataclass(frozen=True)
class PolicyRun:
    minutes: list[Minute]
    policy: Combined | None  # None for the oracle


def run_policies(
    trace: Trace,
    setup: Setup,
    *,
    seed: int,
    policies: Sequence[str] = POLICIES,
    progress: Callable[[str], None] | None = None,
    judge_from: datetime | None = None,
) -> dict[str, PolicyRun]:
    """Each policy's minutes (and the policy, to read what it kept) on the same trace, delays and start.

    With ``judge_from`` the policies run from there on, and the trace before it is history: the project's
    reconciler reads it (and what has been played so far) from a simulated CloudWatch that ends at the simulated
    now. Without it, the whole trace is played and the reconciler reads only what has been played so far, as
    a new endpoint's would: configured levels (adjusted by today's level) until it has ``min_history_days``.
    """
    played = judged(trace, judge_from)
    runs: dict[str, PolicyRun] = {}
    for name in policies:
        if progress:
            progress(f"simulating {name} over {len(played) * TICK_S / 86400:.1f} days")
        if name == "oracle":
            runs[name] = PolicyRun(oracle(played, setup), None)
            continue
        history = SimulatedHistory(trace)
        start = starting_instances(trace, played, setup)
        scaler = Scaler(min_capacity=setup.variant.floor, max_capacity=setup.variant.cap, desired=start)
        policy = make_policy(name, setup, history)
        runs[name] = PolicyRun(run(played, policy, scaler, setup.params, seed=seed), policy)
    return runs


def run_with_rollout(
    trace: Trace, setup: Setup, *, seed: int, judge_from: datetime | None, start: datetime
) -> RolloutRun:
    """The project's policy on the primary with a canary rollout of the default steps started at ``start``
    (``fleetsim.rollout``): the canary limits and the bake are fleet.yaml's for the endpoint's environment."""
    played = judged(trace, judge_from)
    history = SimulatedHistory(trace)
    desired = starting_instances(trace, played, setup)
    scaler = Scaler(min_capacity=setup.variant.floor, max_capacity=setup.variant.cap, desired=desired)
    floors = setup.config.rollout_floors(setup.endpoint.environment)
    rollout = Rollout(
        start=start,
        max_canary=setup.endpoint.canary_limits.max_instance_count,
        floor=setup.variant.floor,
        bake=timedelta(seconds=floors.min_bake_seconds),
    )
    policy = make_policy("project", setup, history)
    return run_rollout(played, policy, scaler, setup.params, seed=seed, rollout=rollout, tracking=setup.tracking)


def simulate(
    trace: Trace,
    setup: Setup,
    *,
    seed: int,
    policies: Sequence[str] = POLICIES,
    progress: Callable[[str], None] | None = None,
    judge_from: datetime | None = None,
) -> dict[str, list[Minute]]:
    """Each policy's minutes on the same trace, the same instance delays (``seed``) and the same start."""
    runs = run_policies(trace, setup, seed=seed, policies=policies, progress=progress, judge_from=judge_from)
    return {name: r.minutes for name, r in runs.items()}
