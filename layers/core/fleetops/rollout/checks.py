"""The canary checks, declared as data in ``fleet_config/canary_checks.yaml``, and a rollout's overrides.

One list drives both the CloudWatch queries (:mod:`fleetops.rollout.canary_metrics`) and the verdict
(:mod:`fleetops.rollout.analysis`); what each field means is written at the top of the YAML file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from fleetops.metrics import MetricName
from fleetops.rollout.thresholds import Thresholds
from fleetops.validation import StrictModel, problems, read_yaml_mapping

#: The shipped checks: ``fleet_config`` sits beside the package, in the repository as in the layer (/opt/python).
CANARY_CHECKS = Path(__file__).resolve().parents[2] / "fleet_config" / "canary_checks.yaml"

Compare = Literal["minimum_sample", "maximum", "baseline_increase", "baseline_regression"]
#: What kind of gate a check is, by its ``compare``: the sample size, an absolute limit on the canary alone (an
#: SLO), or a limit relative to the baseline. Reasons and the summary name it, so a reader knows which failed.
Gate = Literal["sample", "absolute", "relative"]
GATE: dict[Compare, Gate] = {
    "minimum_sample": "sample",
    "maximum": "absolute",
    "baseline_increase": "relative",
    "baseline_regression": "relative",
}
#: Statistics that add up over periods: 0, never missing, when a variant had no datapoints.
ADDITIVE = frozenset({"Sum", "SampleCount"})
_STATISTIC = re.compile(r"^(Sum|SampleCount|Average|Maximum|Minimum|p(\d{1,2}(\.\d+)?|100))$")
_CHECK_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class CanaryChecksError(ValueError):
    """The canary checks file cannot be used (unreadable, not YAML, or invalid); the message names the check."""


@dataclass(frozen=True)
class Series:
    """One value read per variant: a metric under one statistic."""

    metric: MetricName
    statistic: str

    @property
    def key(self) -> str:
        """How the value is keyed in :class:`fleetops.rollout.analysis.VariantStats`."""
        return f"{self.metric}:{self.statistic}"

    @property
    def additive(self) -> bool:
        """Whether the value adds up over periods (and so is 0, not missing, without datapoints)."""
        return self.statistic in ADDITIVE


class CanaryCheck(StrictModel):
    """One declared check (see the header of ``canary_checks.yaml``)."""

    metric: MetricName
    divided_by: MetricName | None = None
    statistic: str
    compare: Compare
    limit: float = Field(ge=0)
    request_threshold: str | None = None
    label: str = Field(min_length=1, description="how the check reads in a reason")
    summary: str | None = Field(default=None, description="how its value reads in the summary; '{}' is the value")

    @field_validator("metric", "divided_by", mode="before")
    @classmethod
    def _known_metric(cls, name: object) -> object:
        names = [m.value for m in MetricName]
        if name is None or name in names:
            return name
        import difflib  # here: only a wrong checks file needs a suggestion, and difflib costs every cold start ~1 ms

        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"unknown metric {name!r}, not a name of fleetops.metrics.MetricName{hint}")

    @field_validator("statistic")
    @classmethod
    def _known_statistic(cls, statistic: str) -> str:
        if not _STATISTIC.match(statistic):
            raise ValueError(
                f"unknown statistic {statistic!r}: use Sum, SampleCount, Average, Maximum, Minimum "
                "or a percentile such as p95"
            )
        return statistic

    @field_validator("request_threshold")
    @classmethod
    def _known_threshold(cls, name: str | None) -> str | None:
        if name is not None and name not in Thresholds.model_fields:
            raise ValueError(f"{name!r} is not a rollout request threshold: one of {sorted(Thresholds.model_fields)}")
        return name

    @field_validator("summary")
    @classmethod
    def _one_placeholder(cls, summary: str | None) -> str | None:
        if summary is not None and (summary.count("{}") != 1 or "{" in summary.replace("{}", "")):
            raise ValueError(f"summary {summary!r} must hold '{{}}' (the value) once and no other braces")
        return summary

    @property
    def gate(self) -> Gate:
        return GATE[self.compare]

    def series(self) -> tuple[Series, ...]:
        """What the check reads: its metric, and the divisor of a ratio."""
        own = Series(self.metric, self.statistic)
        return (own,) if self.divided_by is None else (own, Series(self.divided_by, self.statistic))

    def may_lack_a_value(self) -> bool:
        """Whether a variant can have no value for it: a percentile (or average, ...) without datapoints."""
        return not all(s.additive for s in self.series())


class CanaryChecks(StrictModel):
    """The declared checks, in the order their reasons are listed."""

    version: str = Field(min_length=1)
    checks: dict[str, CanaryCheck] = Field(min_length=1)

    @model_validator(mode="after")
    def _complete(self) -> CanaryChecks:
        bad = [name for name in self.checks if not _CHECK_ID.match(name)]
        if bad:
            raise ValueError(f"check names must be lower-case kebab-case (they name the analysis lines): {bad}")
        if not any(c.compare == "minimum_sample" for c in self.checks.values()):
            raise ValueError("no minimum_sample check: a canary without traffic would pass")
        # Every threshold a request may set must still change something.
        claimed = {c.request_threshold for c in self.checks.values()}
        orphans = sorted(set(Thresholds.model_fields) - claimed)
        if orphans:
            raise ValueError(f"rollout request thresholds {orphans} override no check: name them in request_threshold")
        # The baseline has no value at the 100 % step (it serves nothing) or after a quiet window; a relative check
        # is then judged by an absolute gate on its series. Without one the analysis can only call the canary
        # inconclusive, so every rollout would stall at its last step: refuse the file now, not then.
        ungated = [
            name
            for name, check in self.checks.items()
            if check.gate == "relative" and check.may_lack_a_value() and not self.absolute_gates(check)
        ]
        if ungated:
            raise ValueError(
                f"relative checks {ungated} have no absolute gate (a maximum check on the same metric and "
                "statistic) to judge the canary by when the baseline has no value"
            )
        return self

    def absolute_gates(self, check: CanaryCheck) -> tuple[str, ...]:
        """The names of the ``maximum`` checks that read exactly what ``check`` reads.

        Examples
        --------
        >>> checks = load_canary_checks()
        >>> checks.absolute_gates(checks.checks["p95-ttft"])
        ('ttft-slo',)
        """
        return tuple(name for name, c in self.checks.items() if c.compare == "maximum" and c.series() == check.series())

    def series(self) -> tuple[Series, ...]:
        """Every series the checks read, each once, in declaration order (one query each).

        Examples
        --------
        >>> [s.key for s in load_canary_checks().series()][:3]
        ['Requests:Sum', 'RequestErrors:Sum', 'RequestLatencyMs:p95']
        """
        return tuple(dict.fromkeys(s for check in self.checks.values() for s in check.series()))

    def with_overrides(self, thresholds: Thresholds) -> CanaryChecks:
        """The checks with a rollout's overrides applied to the limits.

        Examples
        --------
        >>> checks = load_canary_checks().with_overrides(Thresholds(max_latency_regression=0.5))
        >>> checks.checks["p95-latency"].limit, checks.checks["p95-ttft"].limit, checks.checks["oom"].limit
        (0.5, 0.5, 0.0)
        """
        set_now = thresholds.model_dump()
        checks: dict[str, CanaryCheck] = {}
        for name, check in self.checks.items():
            override = set_now.get(check.request_threshold) if check.request_threshold else None
            checks[name] = check if override is None else check.model_copy(update={"limit": float(override)})
        return self.model_copy(update={"checks": checks})


def load_canary_checks(path: str | Path = CANARY_CHECKS) -> CanaryChecks:
    """Read and validate the canary checks; any problem raises :class:`CanaryChecksError` naming file and check.

    Examples
    --------
    >>> load_canary_checks().checks["requests"].limit
    200.0
    """
    raw = read_yaml_mapping(path, "canary checks", CanaryChecksError)
    try:
        return CanaryChecks.model_validate(raw)
    except ValidationError as exc:
        raise CanaryChecksError(f"invalid canary checks {path}: " + "; ".join(problems(exc, root="file"))) from None
