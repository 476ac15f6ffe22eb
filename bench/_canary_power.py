"""What the canary analysis's comparison of error counts can detect at a given traffic: exact arithmetic, no replay.

The analysis fails a canary on errors against the primary when its rate is over the primary's by more than the
check's limit *and* Fisher's exact test on both variants' counts gives a one-sided p below
:data:`fleetops.rollout.significance.ALPHA` (:func:`fleetops.rollout.significance.excess_p_value`). Given the
requests each variant served in a window, the chance that one analysis fails a canary whose error rate is
``factor`` times the primary's follows from the counts alone: both variants' errors are Poisson, and given their
total the canary's share is binomial; the test rejects from the smallest canary count it calls beyond chance.
That bounds what any rollout can see at the shipped traffic, whatever the replay draws.
"""

from __future__ import annotations

import math

import numpy as np

from fleetops.rollout.significance import ALPHA

#: The chance of a detection asked of a "detectable" effect: half (the bench's minutes-to-detect is a median).
HALF = 0.5
#: The longest bake :func:`minutes_needed` looks at: two days.
MAX_MINUTES = 2880


def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=float)))])


def _log_pmf_poisson(mean: float, counts: np.ndarray, log_fact: np.ndarray) -> np.ndarray:
    return np.asarray(counts * math.log(mean) - mean - log_fact[counts], dtype=float)


def detection_chance(
    canary_requests: int, baseline_requests: int, rate: float, factor: float, increase: float, alpha: float = ALPHA
) -> float:
    """The chance one analysis of a window with these requests fails the canary on its errors against the
    primary's: primary errors at ``rate``, the canary's at ``factor`` x ``rate``, the limit ``increase`` (a
    fraction: 0.001 is 0.1 point) and Fisher's exact one-sided test at ``alpha``.

    Examples
    --------
    >>> round(detection_chance(540, 10260, 0.002, 1.0, 0.001), 5) < 0.001  # no regression: a false alarm's chance
    True
    >>> detection_chance(540, 10260, 0.002, 20.0, 0.001) > 0.99  # 4 % errors against 0.2 %
    True
    """
    n_c, n_b = canary_requests, baseline_requests
    mean_c, mean_b = n_c * rate * factor, n_b * rate
    total_mean = mean_c + mean_b
    spread = 8 * math.sqrt(total_mean) + 10
    totals = np.arange(max(0, int(total_mean - spread)), int(total_mean + spread) + 1)
    log_fact = _log_factorials(n_c + n_b)
    weights = np.exp(_log_pmf_poisson(total_mean, totals, log_fact))
    share = mean_c / total_mean
    chance = 0.0
    for total, weight in zip(totals.tolist(), weights.tolist(), strict=True):
        if total == 0 or weight < 1e-15:
            continue
        k = np.arange(max(0, total - n_b), min(total, n_c) + 1)
        # Fisher's null: given all errors, the canary's count is hypergeometric (its share of the requests).
        null = log_fact[total] - log_fact[k] - log_fact[total - k]
        null += log_fact[n_c + n_b - total] - log_fact[n_c - k] - log_fact[n_b - total + k]
        null -= log_fact[n_c + n_b] - log_fact[n_c] - log_fact[n_b]
        tail = np.cumsum(np.exp(null)[::-1])[::-1]  # P(X >= k) under the null
        over = k / n_c > (total - k) / n_b + increase
        rejected = np.flatnonzero((tail < alpha) & over & (k > 0))
        if not rejected.size:
            continue
        # The canary's share of the errors under the regression: binomial, from the first count rejected up.
        alt = log_fact[total] - log_fact[k] - log_fact[total - k] + k * math.log(share)
        alt += (total - k) * math.log1p(-share)
        chance += weight * float(np.exp(alt[rejected[0] :]).sum())
    return min(1.0, chance)


def smallest_factor(
    canary_requests: int, baseline_requests: int, rate: float, increase: float, alpha: float = ALPHA
) -> float:
    """The canary's error factor that one analysis of such a window fails half the time (to 0.01).

    Examples
    --------
    >>> 3 < smallest_factor(540, 10260, 0.002, 0.001) < 10  # the 5 % step's bake at 12 rps
    True
    """
    low, high = 1.0, 100.0
    while high - low > 0.01:
        mid = (low + high) / 2
        found = detection_chance(canary_requests, baseline_requests, rate, mid, increase, alpha)
        low, high = (low, mid) if found >= HALF else (mid, high)
    return round(high, 2)


def minutes_needed(rps: float, weight: float, rate: float, factor: float, increase: float, alpha: float = ALPHA) -> int:
    """The bake, in whole minutes at ``weight`` % of ``rps``, whose one analysis fails the canary at ``factor``
    half the time (requests at their expected counts); -1 when not within :data:`MAX_MINUTES` (a limit
    ``increase`` as large as the regression itself keeps the chance under a half on any traffic).

    Examples
    --------
    >>> minutes_needed(12, 50, 0.002, 5.0, 0.001)  # 1 % errors against 0.2 %, half the traffic each
    7
    """

    def chance(minutes: int) -> float:
        canary = round(rps * 60 * minutes * weight / 100)
        return detection_chance(canary, round(rps * 60 * minutes) - canary, rate, factor, increase, alpha)

    low, high = 0, 1
    while chance(high) < HALF:
        if high >= MAX_MINUTES:
            return -1
        low, high = high, min(MAX_MINUTES, high * 2)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if chance(mid) >= HALF else (mid, high)
    return high
