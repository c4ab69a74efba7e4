"""The start-up design: the first trials cover every level of each unconditional categorical knob.

With 8 trials and 2 random start-up trials, TPE sampled ``norm=group`` in 8 of 8 trials of the
main job, so BatchNorm vs GroupNorm, the comparison people run this tool for, was never made.
Before the sampler takes over, the search enqueues ``m`` trials (``m`` = the most levels any
categorical knob has): every level of every unconditional categorical appears at least once,
in a mixed-radix arrangement that keeps two-level knobs orthogonal where ``m`` rows allow
(BatchNorm and GroupNorm each with AMP on and off). A conditional knob (``gn_groups``, only with
GroupNorm) cycles through its levels in the rows where it applies. Numeric parameters (``base_lr``)
are left to the sampler. Spaces do not change: the design only fixes some of their choices.

The order of each factor's levels is shuffled with the search's seed, so which levels meet in
a row (lr 1e-3 with batch 128, say) is not fixed by how the space lists its choices.
"""

from __future__ import annotations

import random
from typing import Any

from tuner.search.plan import SpaceProfile

__all__ = ["startup_design"]


def startup_design(
    profile: SpaceProfile, *, budget: int | None, seed: int = 0
) -> list[dict[str, Any]]:
    """Partial parameter dicts to enqueue first (at most ``budget`` of them)."""
    rng = random.Random(seed)
    factors = sorted(
        (
            (name, choices)
            for name, choices in profile.categoricals.items()
            if name not in profile.conditional and len(choices) > 1
        ),
        key=lambda item: -len(item[1]),
    )
    if not factors:
        return []
    rows = max(len(choices) for _, choices in factors)
    if budget is not None:
        rows = min(rows, budget)
    design = [dict() for _ in range(rows)]
    stride = 1
    for name, levels in factors:
        choices = rng.sample(levels, len(levels))
        if stride * len(choices) > rows:
            stride = 1  # cannot stay orthogonal to the factors before: start a new block
        for i, row in enumerate(design):
            row[name] = choices[(i // stride) % len(choices)]
        stride *= len(choices)
    for name, choices in profile.categoricals.items():
        if name in profile.conditional:
            for k, row in enumerate(design):
                row[name] = choices[k % len(choices)]  # ignored where it does not apply
    return design
