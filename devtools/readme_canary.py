"""The README's canary-judge table, generated from ``bench/results/canary_judge.json`` (registered in
:data:`devtools.readme_bench.BLOCKS`, checked by the same test)."""

from __future__ import annotations

from pathlib import Path

from devtools.readme_bench import RESULTS, Figure, load

#: The canary held at one weight: the sizes of ``bench.canary_judge.SIZES`` in the README's order.
SIZES = (
    ("aa", "none (A/A)"),
    ("ttft_x1.05", "TTFT x1.05"),
    ("ttft_x1.1", "TTFT x1.1"),
    ("ttft_x1.2", "TTFT x1.2"),
    ("errors_x2", "errors x2 (0.4 %)"),
    ("errors_x3", "errors x3 (0.6 %)"),
    ("errors_x5", "errors x5 (1 %)"),
)
WEIGHTS = (5, 25, 50)
#: The rollouts of a canary over the error-rate SLO (``bench.canary_judge.OVER_SLO``).
OVER_SLO = (
    ("errors_1pct", "canary 1 %, primary 0.2 %"),
    ("errors_1pct_both", "both at 1 %"),
    ("errors_0.75pct_both", "both at 0.75 %"),
)
STEPS = (5, 25, 50, 75, 100)


def _detect(minutes: Figure) -> str:
    return "never" if minutes < 0 else f"{minutes:.0f} min"


def canary_table(results: Path = RESULTS) -> str:
    """Per regression and weight: the shares failed and passed by one analysis at the shipped bake (the rest bake
    again) and the shortest bake that fails half; then, per over-SLO scenario, where the rollouts were rolled
    back and how many reached 100 %."""
    r = load("canary_judge", results)
    bake = f"{r['bake_minutes']:.0f} min"
    head = " | ".join(f"{w} %: failed / passed at {bake} (half failed by)" for w in WEIGHTS)
    lines = [f"| canary held at | {head} |", "|---|" + "---|" * len(WEIGHTS)]
    for size, label in SIZES:
        cells = [
            f"{r[f'fail_rate_at_bake__{size}__w{w}']:.0%} / {r[f'pass_rate_at_bake__{size}__w{w}']:.0%} "
            f"({_detect(r[f'minutes_to_detect__{size}__w{w}'])})"
            for w in WEIGHTS
        ]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    steps = " | ".join(f"rolled back at {s} %" for s in STEPS)
    lines += ["", f"| errors over the 0.5 % SLO | {steps} | reached 100 % |", "|---|" + "---|" * (len(STEPS) + 1)]
    for name, label in OVER_SLO:
        cells = [f"{r[f'rolled_back_at_step_rate__{name}__w{s}']:.1%}" for s in STEPS]
        lines.append(f"| {label} | {' | '.join(cells)} | {r[f'pct_reaching_100__{name}']:g} % |")
    return "\n".join(lines)
