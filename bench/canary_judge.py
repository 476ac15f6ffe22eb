"""How often the canary analysis rolls back a good release, and how long it needs to see a bad one.

Per-request TTFTs, latencies and errors of a primary and a canary are replayed, minute by minute, into a
stand-in for CloudWatch (:class:`ReplayedCloudWatch`: GetMetricData over the replayed requests, the statistics
the analysis asks for computed from them). The analysis is the project's own: ``CanaryMetrics.window`` reads
the window as the ``canary_analysis`` function does, and ``analyse`` judges it under the shipped
``canary_checks.yaml``. A rollout follows the shipped state machine: the default steps (5, 25, 50, 75, 100 %),
the default bake (``bake_seconds``) with an analysis at its end, an inconclusive verdict baking again on the
same window (up to ``max_extensions``) and then rolling back, a failed one rolling back. Approvals take no time.

Traffic: the prod endpoint's ``baseline_rps`` in ``fleet.yaml`` (Poisson per minute), the canary's share of each
minute's requests drawn at its weight. Shape (:class:`Shape`): TTFT lognormal (median 170 ms, sigma 0.45) with a
3 % slow tail (long prompts, queueing) a further lognormal x2.5 (sigma 0.4) slower; answer latency is the TTFT
plus 15 ms per output token, tokens lognormal (median 120, sigma 0.6, at most 512; p95 about 5 s, the
latency SLO's baseline); both variants share a per-minute drift (AR(1) on the log, phi 0.8, sd 0.1: load,
noisy neighbours); 0.2 % of requests are errors
(no latency recorded). A regression multiplies the canary's TTFTs (every percentile by the same factor) or
its error probability (and, where said, the primary's too).

Keys (rates are fractions of the rollouts):

- ``aa_false_rollback_rate``: A/A rollouts (the canary is the primary) that were rolled back, of ``aa_rollouts``;
  ``aa_false_rollbacks__<check>``: how many of them each check failed (one rollback may name two;
  ``inconclusive-<check>``: still inconclusive on it when the extensions ran out).
- ``minutes_to_detect_<regression>_at_5pct_weight``: median minutes from the canary's first request (the 5 %
  step) to its rollback over ``ab_rollouts`` rollouts; -1 when fewer than half were rolled back.
  ``detected_rate__<regression>``: rolled back at all; ``detected_at_5pct_step_rate__<regression>``: at the 5 %
  step; ``rolled_back_at_step_rate__<regression>__w<step>``: at each step. Regressions: ``ttft_p95_plus10pct``
  (TTFT x1.10), ``errors_plus50pct`` (errors x1.5).
- What the error comparison can see of ``errors_plus50pct`` at all, from the counts alone (exact, no replay:
  ``bench/_canary_power.py``; Fisher's test at the shipped alpha without the check's 0.1-point margin unless
  said): ``errors_plus50pct_detect_chance_at_5pct_bake`` (one analysis after the 5 % step's bake;
  ``..._alpha_0.01``: a test spending the whole A/A budget on that one look),
  ``errors_factor_detected_half_at_5pct_bake`` (the error factor that analysis fails half the time),
  ``errors_plus50pct_minutes_for_half_at_5pct_weight`` (the bake at 5 % it needs to fail half of them;
  ``..._alpha_0.01``; ``..._with_margin``: with the margin, which equals the whole regression, -1: never),
  ``errors_plus50pct_detect_chance_pooled_rollout`` (every request of the 5 to 75 % steps in one analysis).
- A canary over the error-rate SLO, through the whole rollout, ``ab_rollouts`` each: ``errors_1pct`` (1 % errors,
  twice the 0.5 % SLO, against the primary's 0.2 %), ``errors_1pct_both`` (the primary at 1 % too, so only the
  absolute SLO can stop it) and ``errors_0.75pct_both`` (both at 0.75 %):
  ``rolled_back_at_step_rate__<scenario>__w<step>``, the share rolled back at each step;
  ``pct_reaching_100__<scenario>``, the percentage whose canary reached the 100 % step (rolled back there or
  promoted).
- The table, the canary held at one weight (``__w<weight>``) and judged once after a bake of L minutes (L in
  :data:`LOOKS`), ``TABLE_SEEDS`` seeds each: ``fail_rate_at_bake__<size>__w<weight>``: failed at the shipped
  bake, ``pass_rate_at_bake__<size>__w<weight>``: passed there (the rest: inconclusive, baked again);
  ``minutes_to_detect__<size>__w<weight>``: the shortest bake that fails at least half of them (-1: none
  up to 60); ``<size>`` is ``aa`` (no regression), ``ttft_x<factor>`` or ``errors_x<factor>``.
- ``baseline_rps``, ``bake_minutes``, ``max_extensions`` and the shape's parameters as used; the primary's
  measured TTFT ``ttft_p50_ms`` / ``ttft_p95_ms`` / ``ttft_p99_ms``; ``bench_seconds``.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import numpy as np

from bench._canary_power import detection_chance, minutes_needed, smallest_factor
from fleetops.config import load_fleet_config
from fleetops.rollout.analysis import Analysis, analyse
from fleetops.rollout.canary_metrics import CanaryMetrics
from fleetops.rollout.checks import CanaryChecks, load_canary_checks
from fleetops.rollout.request_schema import DEFAULT_STEPS, RolloutRequest

FLEET = Path(__file__).resolve().parents[1] / "layers/core/fleet_config/fleet.yaml"
ENDPOINT = "manga-chat-prod"
CANARY, PRIMARY = "canary", "primary"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
AA_ROLLOUTS = 1000
AB_ROLLOUTS = 200
TABLE_SEEDS = 60
WEIGHTS = (5, 25, 50)
LOOKS = (5, 10, 15, 20, 30, 45, 60)
SIZES: dict[str, tuple[float, float]] = {  # name -> (TTFT factor, error factor)
    "aa": (1.0, 1.0),
    "ttft_x1.05": (1.05, 1.0),
    "ttft_x1.1": (1.10, 1.0),
    "ttft_x1.2": (1.20, 1.0),
    "ttft_x1.5": (1.50, 1.0),
    "errors_x1.5": (1.0, 1.5),
    "errors_x2": (1.0, 2.0),
    "errors_x3": (1.0, 3.0),
    "errors_x5": (1.0, 5.0),
}
REGRESSIONS = {"ttft_p95_plus10pct": (1.10, 1.0), "errors_plus50pct": (1.0, 1.5)}
#: A one-sided test spending the whole A/A budget on one look: what even a lenient comparison could see.
LENIENT_ALPHA = 0.01
#: name -> (TTFT factor, canary error factor, primary error factor), of the shape's 0.2 % errors.
OVER_SLO = {
    "errors_1pct": (1.0, 5.0, 1.0),
    "errors_1pct_both": (1.0, 5.0, 5.0),
    "errors_0.75pct_both": (1.0, 3.75, 3.75),
}


@dataclass(frozen=True)
class Shape:
    """The replayed requests' distributions (see the module's docstring)."""

    ttft_median_ms: float = 170.0
    ttft_sigma: float = 0.45
    slow_share: float = 0.03
    slow_factor: float = 2.5
    slow_sigma: float = 0.4
    ms_per_token: float = 15.0
    tokens_median: float = 120.0
    tokens_sigma: float = 0.6
    max_tokens: int = 512
    drift_phi: float = 0.8
    drift_sd: float = 0.1
    error_rate: float = 0.002


@dataclass
class Minute:
    requests: int
    errors: int
    ttft: np.ndarray
    latency: np.ndarray


@dataclass
class Traffic:
    """One replay: per-minute requests of both variants, the drift shared, drawn as the rollout needs them."""

    seed: int
    rps: float
    ttft_factor: float = 1.0
    error_factor: float = 1.0
    primary_error_factor: float = 1.0
    shape: Shape = field(default_factory=Shape)
    minutes: dict[str, list[Minute]] = field(default_factory=lambda: {CANARY: [], PRIMARY: []})

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.drift = 0.0

    def play(self, minutes: int, weight: float) -> None:
        s, rng = self.shape, self.rng
        for _ in range(minutes):
            self.drift = s.drift_phi * self.drift + rng.normal(0.0, s.drift_sd * np.sqrt(1 - s.drift_phi**2))
            total = int(rng.poisson(self.rps * 60))
            canary = int(rng.binomial(total, weight / 100))
            self.minutes[CANARY].append(self._requests(canary, self.ttft_factor, self.error_factor))
            self.minutes[PRIMARY].append(self._requests(total - canary, 1.0, self.primary_error_factor))

    def _requests(self, n: int, ttft_factor: float, error_factor: float) -> Minute:
        s, rng = self.shape, self.rng
        errors = int(rng.binomial(n, min(1.0, s.error_rate * error_factor)))
        ok = n - errors
        ttft = rng.lognormal(np.log(s.ttft_median_ms), s.ttft_sigma, ok)
        slow = rng.random(ok) < s.slow_share
        ttft[slow] *= rng.lognormal(np.log(s.slow_factor), s.slow_sigma, int(slow.sum()))
        tokens = np.minimum(s.max_tokens, rng.lognormal(np.log(s.tokens_median), s.tokens_sigma, ok))
        level = float(np.exp(self.drift))
        ttft = ttft * level * ttft_factor
        return Minute(n, errors, ttft, ttft + tokens * s.ms_per_token * level)


class ReplayedCloudWatch:
    """A stand-in for CloudWatch's GetMetricData (the bench's test double): each query is answered as one
    period over the replayed minutes in ``[StartTime, EndTime)``, with the statistics the analysis reads."""

    def __init__(self, traffic: Traffic) -> None:
        self.traffic = traffic

    def get_metric_data(self, **kwargs: Any) -> dict[str, Any]:
        first = int((kwargs["StartTime"] - T0).total_seconds() // 60)
        last = int((kwargs["EndTime"] - T0).total_seconds() // 60)
        results = []
        for query in kwargs["MetricDataQueries"]:
            stat = query["MetricStat"]
            dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
            minutes = self.traffic.minutes[dims["VariantName"]][first:last]
            value = _statistic(stat["Metric"]["MetricName"], stat["Stat"], minutes)
            results.append({"Id": query["Id"], "Values": [] if value is None else [value]})
        return {"MetricDataResults": results}


def _statistic(metric: str, stat: str, minutes: list[Minute]) -> float | None:
    if stat == "Sum" and metric in ("Requests", "RequestErrors"):
        return float(sum(m.requests if metric == "Requests" else m.errors for m in minutes))
    if metric not in ("TimeToFirstTokenMs", "RequestLatencyMs"):
        return None  # OOMs, breaker trips, restarts: none replayed, so no datapoints
    values = np.concatenate([m.ttft if metric == "TimeToFirstTokenMs" else m.latency for m in minutes])
    if stat == "SampleCount":
        return float(values.size)
    if not values.size:
        return None
    if stat.startswith("PR(:") and stat.endswith(")"):  # percentile rank: the share at or below the bound, in %
        return float(np.count_nonzero(values <= float(stat[4:-1])) * 100.0 / values.size)
    if stat.startswith("p"):
        return float(np.percentile(values, float(stat[1:]), method="inverted_cdf"))  # nearest rank
    raise ValueError(f"the replayed CloudWatch does not compute {stat!r} for {metric}")


def _judge(traffic: Traffic, checks: CanaryChecks, start: int, end: int) -> Analysis:
    source = CanaryMetrics(checks, client=cast(Any, ReplayedCloudWatch(traffic)))
    window = (T0 + timedelta(minutes=start), T0 + timedelta(minutes=end))
    canary, baseline = source.window(ENDPOINT, CANARY, PRIMARY, *window)
    return analyse(canary, baseline, checks)


@dataclass(frozen=True)
class Rollout:
    rolled_back: bool
    minute: int
    weight: int
    failed_checks: tuple[str, ...]


def rollout(seed: int, rps: float, checks: CanaryChecks, factors: tuple[float, ...]) -> Rollout:
    """One rollout through the shipped steps, bakes and extensions; where and why it ended."""
    traffic = _traffic(seed, rps, factors)
    bake, extensions = _shipped_bake()
    now = 0
    for weight in DEFAULT_STEPS:
        start = now
        for _extension in range(extensions + 1):
            traffic.play(bake, weight)
            now += bake
            result = _judge(traffic, checks, start, now)
            if result.verdict == "pass":
                break
            if result.verdict == "fail":
                return Rollout(True, now, weight, tuple(c.name for c in result.checks if c.outcome == "fail"))
        else:
            unsure = tuple(f"inconclusive-{c.name}" for c in result.checks if c.outcome == "inconclusive")
            return Rollout(True, now, weight, unsure)
    return Rollout(False, now, 100, ())


def _traffic(seed: int, rps: float, factors: tuple[float, ...]) -> Traffic:
    """``factors``: the canary's TTFT and error factors, then the primary's error factor (default 1)."""
    ttft, errors, *primary = factors
    return Traffic(seed, rps, ttft, errors, primary[0] if primary else 1.0)


def _shipped_bake() -> tuple[int, int]:
    fields = RolloutRequest.model_fields
    return int(fields["bake_seconds"].default) // 60, int(fields["max_extensions"].default)


def baseline_rps() -> float:
    endpoint = load_fleet_config(FLEET).endpoint(ENDPOINT)
    if endpoint is None:
        raise ValueError(f"{FLEET} has no endpoint {ENDPOINT!r}")
    return next(v.baseline_rps for v in endpoint.variants if v.role == "primary")


def held(seed: int, rps: float, checks: CanaryChecks, weight: int, factors: tuple[float, float]) -> list[str]:
    """The canary held at ``weight``: the verdict of one analysis after each bake length of :data:`LOOKS`."""
    traffic = Traffic(seed, rps, *factors)
    traffic.play(max(LOOKS), weight)
    return [_judge(traffic, checks, 0, look).verdict for look in LOOKS]


def _by_step(name: str, runs: list[Rollout]) -> dict[str, float]:
    return {
        f"rolled_back_at_step_rate__{name}__w{step}": round(
            sum(r.rolled_back and r.weight == step for r in runs) / len(runs), 4
        )
        for step in DEFAULT_STEPS
    }


def errors_plus50pct_arithmetic(rps: float, bake: int, rate: float, checks: CanaryChecks) -> dict[str, float]:
    """What the error comparison can see of ``errors_plus50pct`` at this traffic, from the counts alone
    (:mod:`bench._canary_power`): the test alone unless said (``_with_margin``: also the check's limit)."""
    margin = next(c.limit for c in checks.checks.values() if c.compare == "baseline_increase")
    factor, per_bake = REGRESSIONS["errors_plus50pct"][1], rps * 60 * bake
    canary = round(per_bake * DEFAULT_STEPS[0] / 100)
    baseline = round(per_bake) - canary
    # The whole rollout's counts while a primary still serves (5 % to 75 %), one bake each, as one analysis.
    pooled_canary = round(sum(per_bake * w / 100 for w in DEFAULT_STEPS if w < 100))
    pooled_baseline = round(per_bake * sum(1 for w in DEFAULT_STEPS if w < 100)) - pooled_canary
    name, w = "errors_plus50pct", DEFAULT_STEPS[0]
    return {
        f"{name}_detect_chance_at_{w}pct_bake": round(detection_chance(canary, baseline, rate, factor, 0.0), 5),
        f"{name}_detect_chance_at_{w}pct_bake_alpha_{LENIENT_ALPHA}": round(
            detection_chance(canary, baseline, rate, factor, 0.0, LENIENT_ALPHA), 5
        ),
        f"errors_factor_detected_half_at_{w}pct_bake": smallest_factor(canary, baseline, rate, 0.0),
        f"{name}_minutes_for_half_at_{w}pct_weight": minutes_needed(rps, w, rate, factor, 0.0),
        f"{name}_minutes_for_half_at_{w}pct_weight_alpha_{LENIENT_ALPHA}": minutes_needed(
            rps, w, rate, factor, 0.0, LENIENT_ALPHA
        ),
        f"{name}_minutes_for_half_at_{w}pct_weight_with_margin": minutes_needed(rps, w, rate, factor, margin),
        f"{name}_detect_chance_pooled_rollout": round(
            detection_chance(pooled_canary, pooled_baseline, rate, factor, 0.0), 4
        ),
    }


def _median_minutes(outcomes: list[Rollout]) -> float:
    if sum(o.rolled_back for o in outcomes) * 2 < len(outcomes):
        return -1.0
    return float(statistics.median_low([o.minute if o.rolled_back else 10**6 for o in outcomes]))


def run(aa: int = AA_ROLLOUTS, ab: int = AB_ROLLOUTS, table_seeds: int = TABLE_SEEDS) -> dict[str, float]:
    started = time.perf_counter()
    checks, rps = load_canary_checks(), baseline_rps()
    bake, extensions = _shipped_bake()
    shape = Shape()
    results: dict[str, float] = {"baseline_rps": rps, "bake_minutes": bake, "max_extensions": extensions}
    results |= {f"shape_{k}": float(v) for k, v in vars(shape).items()}
    sample = Traffic(0, rps)
    sample.play(60, 0)
    ttft = np.concatenate([m.ttft for m in sample.minutes[PRIMARY]])
    for pct in (50, 95, 99):
        results[f"ttft_p{pct}_ms"] = round(float(np.percentile(ttft, pct)), 1)

    aa_runs = [rollout(seed, rps, checks, (1.0, 1.0)) for seed in range(aa)]
    results["aa_rollouts"] = aa
    results["aa_false_rollback_rate"] = round(sum(r.rolled_back for r in aa_runs) / aa, 4)
    for check, count in Counter(c for r in aa_runs for c in r.failed_checks).items():
        results[f"aa_false_rollbacks__{check}"] = count
    results["ab_rollouts"] = ab
    for name, factors in REGRESSIONS.items():
        runs = [rollout(10_000 + seed, rps, checks, factors) for seed in range(ab)]
        results[f"minutes_to_detect_{name}_at_5pct_weight"] = _median_minutes(runs)
        results[f"detected_rate__{name}"] = round(sum(r.rolled_back for r in runs) / ab, 4)
        results[f"detected_at_5pct_step_rate__{name}"] = round(
            sum(r.rolled_back and r.weight == 5 for r in runs) / ab, 4
        )
        results |= _by_step(name, runs)
    results |= errors_plus50pct_arithmetic(rps, bake, shape.error_rate, checks)
    for name, over in OVER_SLO.items():
        runs = [rollout(30_000 + seed, rps, checks, over) for seed in range(ab)]
        results |= _by_step(name, runs)
        results[f"pct_reaching_100__{name}"] = round(100 * sum(r.weight == 100 for r in runs) / ab, 2)

    results["table_seeds"] = table_seeds
    for weight in WEIGHTS:
        for size, factors in SIZES.items():
            verdicts = np.array([held(20_000 + seed, rps, checks, weight, factors) for seed in range(table_seeds)])
            rates = (verdicts == "fail").mean(axis=0)
            results[f"fail_rate_at_bake__{size}__w{weight}"] = round(float(rates[LOOKS.index(bake)]), 4)
            passed = (verdicts[:, LOOKS.index(bake)] == "pass").mean()
            results[f"pass_rate_at_bake__{size}__w{weight}"] = round(float(passed), 4)
            enough = [look for look, rate in zip(LOOKS, rates, strict=True) if rate >= 0.5]
            results[f"minutes_to_detect__{size}__w{weight}"] = float(enough[0]) if enough else -1.0
    results["bench_seconds"] = round(time.perf_counter() - started, 1)
    return results
