"""The remediation playbook: alarm kinds, their thresholds, and what to do when they fire (config, not code)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from fleetops.metrics import MetricName
from fleetops.remediation.actions import FLEET_CHANGING, ActionType
from fleetops.remediation.burn_rate import burn_rate_alarms
from fleetops.remediation.playbook_file import PlaybookError, read_playbook
from fleetops.remediation.rails import Rails
from fleetops.validation import StrictModel

Comparison = Literal[
    "GreaterThanThreshold", "GreaterThanOrEqualToThreshold", "LessThanThreshold", "LessThanOrEqualToThreshold"
]


class RoleActions(StrictModel):
    """Actions for an ALARM on a primary and on a canary variant.

    ``promoted``: on a primary inside the watch window after its promotion (fleet.yaml's
    ``rollout_policy.<env>.watch_after_promotion_seconds``), where a rollback undoes that promotion; ``None``: as
    ``primary``.
    """

    primary: tuple[ActionType, ...] = ()
    canary: tuple[ActionType, ...] = ()
    promoted: tuple[ActionType, ...] | None = None

    def for_role(self, role: str, *, watched: bool = False) -> tuple[ActionType, ...]:
        """The actions for a variant of ``role``; ``watched``: a primary inside its watch window."""
        if role == "canary":
            return self.canary
        return self.promoted if watched and self.promoted is not None else self.primary


class AlarmSpec(StrictModel):
    """One alarm kind: the metric and threshold the template's alarm uses, and the playbook's answer.

    ``divided_by`` makes it a ratio alarm (``100 * metric / divided_by``, percent); ``per_max_num_seqs``
    makes it ``100 * metric / max_num_seqs`` (the container's concurrency limit); ``per_adapter`` makes one alarm
    per adapter of the variant, on the metric's ``Adapter`` dimension.
    """

    metric: MetricName
    divided_by: MetricName | None = None
    per_max_num_seqs: bool = False
    per_adapter: bool = False
    statistic: str = Field(pattern=r"^(Sum|Average|Maximum|Minimum|SampleCount|p\d{1,2}(\.\d+)?)$")
    period_seconds: int = Field(ge=10)
    evaluation_periods: int = Field(ge=1)
    datapoints_to_alarm: int | None = Field(default=None, ge=1)
    threshold: float
    comparison: Comparison = "GreaterThanThreshold"
    summary: str = Field(min_length=1, description="what it means, for the notification")
    look_at: str = Field(min_length=1, description="where a human should look first")
    on_alarm: RoleActions
    on_ok: tuple[ActionType, ...] = (ActionType.RECORD_RECOVERY,)

    @model_validator(mode="after")
    def _no_scale_in_on_ok(self) -> AlarmSpec:
        changing = FLEET_CHANGING.intersection(self.on_ok)
        if changing:
            raise ValueError(f"on_ok may not change the fleet (the responder never scales in): {sorted(changing)}")
        if ActionType.ROLLBACK in self.on_alarm.primary:
            raise ValueError(
                "on_alarm.primary may not roll back: only a canary variant can be rolled back, or a primary inside "
                "the watch window after its promotion (on_alarm.promoted)"
            )
        return self


class ScaleStep(StrictModel):
    """Add ``add`` instances when observed / threshold is below ``below_breach`` (``None``: any size)."""

    below_breach: float | None = Field(default=None, gt=1.0)
    add: int = Field(ge=1)


class BurnRateTier(StrictModel):
    """One multi-window burn-rate alert: it fires while both windows spend the error budget ``burn_rate`` times
    faster than the SLO allows (the long window proves it is real, the short one that it is still happening)."""

    name: str = Field(pattern=r"^[a-z]+$", description="fast, slow: part of the alarm names")
    burn_rate: float = Field(gt=0)
    long_window_minutes: int = Field(ge=2, le=10080, description="CloudWatch evaluates at most 7 days")
    short_window_minutes: int = Field(ge=1)
    action: Literal["page", "notify"]

    @model_validator(mode="after")
    def _short_inside_long(self) -> BurnRateTier:
        if self.short_window_minutes >= self.long_window_minutes:
            raise ValueError(f"burn-rate tier {self.name!r}: the short window must be shorter than the long one")
        return self


class ServiceLevels(StrictModel):
    """The service-level objectives of an endpoint, declared once: the alarms and the dashboard use these numbers
    (``tests/unit/test_service_levels.py`` fails when ``template.yaml`` or the nested templates drift from them)."""

    availability_percent: float = Field(gt=0, lt=100, description="answers that are not server errors, 30 days")
    error_rate_percent: float = Field(gt=0, lt=100, description="server errors per minute that page (error-rate)")
    ttft_p50_ms: float = Field(gt=0, description="median time to first token")
    ttft_p95_ms: float = Field(gt=0, description="95 % of first tokens within this (ttft-p95 alarm, TTFT burn rate)")
    latency_p99_ms: float = Field(gt=0, description="99th percentile of a whole answer")
    adapter_latency_p95_baseline_ms: float = Field(gt=0, description="an adapter's usual p95 answer latency")
    adapter_latency_factor: float = Field(gt=1, description="adapter-latency fires at this multiple of the baseline")
    burn_rate_tiers: tuple[BurnRateTier, ...] = Field(min_length=1)

    @property
    def adapter_latency_alarm_ms(self) -> float:
        return self.adapter_latency_p95_baseline_ms * self.adapter_latency_factor

    @model_validator(mode="after")
    def _tiers_named_once(self) -> ServiceLevels:
        names = [t.name for t in self.burn_rate_tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"slo.burn_rate_tiers: each tier needs its own name, got {names}")
        burn_rate_alarms(self)  # a tier no window can show fails here, naming it
        return self


class Playbook(StrictModel):
    version: str = Field(min_length=1)
    slo: ServiceLevels
    rails: Rails
    scale_out_steps: tuple[ScaleStep, ...] = Field(min_length=1)
    alarms: dict[str, AlarmSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _steps_ascend(self) -> Playbook:
        bounds = [s.below_breach for s in self.scale_out_steps]
        if bounds[-1] is not None or any(b is None for b in bounds[:-1]):
            raise ValueError("scale_out_steps: only the last step may (and must) leave below_breach empty")
        finite = [b for b in bounds if b is not None]
        if finite != sorted(set(finite)):
            raise ValueError(f"scale_out_steps: below_breach must strictly increase, got {finite}")
        bad = [k for k in self.alarms if not k.replace("-", "").isalnum() or k != k.lower()]
        if bad:
            raise ValueError(f"alarm kinds must be lower-case kebab-case (they appear in alarm names): {bad}")
        slo_bound = {
            "error-rate": self.slo.error_rate_percent,
            "adapter-latency": self.slo.adapter_latency_alarm_ms,
            "ttft-p95": self.slo.ttft_p95_ms,
        }
        drifted = {k: (self.alarms[k].threshold, v) for k, v in slo_bound.items() if k in self.alarms}
        drifted = {k: pair for k, pair in drifted.items() if pair[0] != pair[1]}
        if drifted:
            raise ValueError(f"alarm thresholds must be the slo's numbers (threshold, slo): {drifted}")
        return self

    def step_for(self, breach: float) -> int:
        """Instances to add for a breach of ``observed / threshold``.

        Examples
        --------
        >>> import fleetops
        >>> pb = load_playbook(Path(fleetops.__file__).parents[1] / "fleet_config" / "playbook.yaml")
        >>> pb.step_for(1.2), pb.step_for(3.0), pb.step_for(10.0)
        (2, 4, 8)
        """
        for step in self.scale_out_steps:
            if step.below_breach is None or breach < step.below_breach:
                return step.add
        return self.scale_out_steps[-1].add  # pragma: no cover - the validator guarantees an open last step


def load_playbook(path: str | Path) -> Playbook:
    """Read and validate ``playbook.yaml``; any problem raises :class:`PlaybookError` naming the file.

    Examples
    --------
    >>> import fleetops
    >>> shipped = Path(fleetops.__file__).parents[1] / "fleet_config"  # beside the package, as in the layer
    >>> load_playbook(shipped / "playbook.yaml").alarms["queue-depth"].threshold
    50.0
    """
    raw = read_playbook(path)
    try:
        return Playbook.model_validate(raw)
    except ValidationError as exc:
        raise PlaybookError(f"invalid playbook {path}: {exc}") from exc
