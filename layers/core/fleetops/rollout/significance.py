"""Whether a canary is worse than a limit or than its baseline beyond chance, from request-level counts.

The analysis compares point values (an error rate, a p95) with their limits; on a few hundred canary requests
those values are noisy enough to roll back one good release in seven. A check on a rate or a percentile fails
only when, besides its point value being over the limit, the counts behind it make chance an unlikely
explanation: a one-sided p-value below :data:`ALPHA`.

- A rate or a percentile against a fixed limit (the SLOs): the exact binomial tail of the count over the limit
  (errors; requests slower than the limit) at the share the SLO allows, :func:`rate_above_p_value`; below
  :data:`HOLD` but not :data:`ALPHA` the canary is neither failed nor passed (bake again).
- A rate against the baseline's: Fisher's exact test on the two variants' counts, :func:`excess_p_value`.
- A latency percentile against the baseline's: both variants' requests counted below the same bounds (multiples
  of the baseline's percentile, :data:`BOUNDS`), then a rank-sum test on those bins for a slower distribution
  (:func:`slower_p_value`) and Fisher's test on the share above the baseline's percentile itself (a slower
  tail); the smaller p-value, doubled (Bonferroni), is the check's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

#: The one-sided false-alarm rate of each test. A rollout makes some 30 (five steps, more looks when a step bakes
#: again; at each look three SLOs and three checks against the baseline, most judged on counts only when their
#: point value is over the limit), so well under 1 % of good releases fail one by chance (Bonferroni); the A/A
#: bench measures it whole.
ALPHA = 0.0002
#: An SLO's point value over its limit holds the step (inconclusive: bake again, never a pass) while the count over
#: it is more likely from a canary above the SLO than from one right at it (p below 0.5); counts at least as
#: likely at the SLO pass. Holding every point value over it rolled back 0.6 % of releases identical to the
#: primary: on the 5 % step's 540 requests, one canary in ten at 0.2 % errors has 3 of them (0.56 %).
HOLD = 0.5
#: Where both variants' latency values are counted: multiples of the baseline's percentile (its p95 for a p95
#: check), so that the bins follow the traffic's own scale and 1.0 marks the percentile compared.
BOUNDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def rate_above_p_value(events: int, trials: int, rate: float) -> float:
    """P(at least ``events`` of ``trials``) when each happens with probability ``rate``: the exact binomial tail.

    Examples
    --------
    >>> round(rate_above_p_value(2, 2, 0.5), 4), round(rate_above_p_value(1, 3, 0.5), 4)
    (0.25, 0.875)
    >>> rate_above_p_value(0, 10, 0.01)
    1.0
    """
    if events <= 0:
        return 1.0
    if events > trials:
        return 0.0
    if rate <= 0.0:
        return 0.0
    if rate >= 1.0:
        return 1.0
    log_p, log_q = math.log(rate), math.log1p(-rate)
    # Sum the shorter side of the distribution; the terms are exact, the complement loses nothing at ALPHA's scale.
    if events <= trials * rate:
        below = sum(math.exp(_log_choose(trials, i) + i * log_p + (trials - i) * log_q) for i in range(events))
        return max(0.0, 1.0 - below)
    return min(
        1.0, sum(math.exp(_log_choose(trials, i) + i * log_p + (trials - i) * log_q) for i in range(events, trials + 1))
    )


def excess_p_value(canary_events: int, canary_trials: int, baseline_events: int, baseline_trials: int) -> float:
    """Fisher's exact one-sided test: how likely the canary's share of all events is this large by chance alone.

    Given the events of both variants together, the canary's count is hypergeometric when both have one rate.

    Examples
    --------
    >>> round(excess_p_value(2, 2, 0, 2), 4)  # both events among the canary's 2 of 4 trials: 1 of C(4, 2) = 6
    0.1667
    >>> excess_p_value(0, 100, 5, 100)
    1.0
    """
    total, events = canary_trials + baseline_trials, canary_events + baseline_events
    if canary_events <= 0 or total == 0:
        return 1.0
    denominator = _log_choose(total, canary_trials)
    top = min(events, canary_trials)
    p = sum(
        math.exp(_log_choose(events, x) + _log_choose(total - events, canary_trials - x) - denominator)
        for x in range(canary_events, top + 1)
        if canary_trials - x <= total - events
    )
    return min(1.0, p)


def slower_p_value(canary_bins: Sequence[float], baseline_bins: Sequence[float]) -> float:
    """The rank-sum (Mann-Whitney) test on binned values: how likely the canary ranks this high by chance alone.

    ``*_bins`` are request counts per bin, fastest first (ties within a bin take their mid-rank); the one-sided
    p-value comes from the normal approximation with the tie correction.

    Examples
    --------
    >>> round(slower_p_value([0, 10], [10, 0]), 6)  # every canary request in the slower bin
    7e-06
    >>> slower_p_value([5, 5], [5, 5])
    0.5
    """
    m, n = sum(canary_bins), sum(baseline_bins)
    total = m + n
    if m == 0 or n == 0:
        return 1.0
    rank_sum, below, ties = 0.0, 0.0, 0.0
    for c, b in zip(canary_bins, baseline_bins, strict=True):
        size = c + b
        rank_sum += c * (below + (size + 1) / 2)
        below += size
        ties += size**3 - size
    expected = m * (total + 1) / 2
    variance = m * n / 12 * ((total + 1) - ties / (total * (total - 1))) if total > 1 else 0.0
    if variance <= 0:
        return 0.5
    z = (rank_sum - expected) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))


def bins(below: Sequence[float], count: float) -> list[float]:
    """Counts per bin from counts at or below increasing bounds (and the total): ``[b0, b1 - b0, ..., n - bk]``.

    Examples
    --------
    >>> bins([2, 5, 5], 9)
    [2.0, 3, 0.0, 4]
    """
    edges = [0.0, *below, count]
    return [max(0.0, hi - lo) for lo, hi in pairwise(edges)]
