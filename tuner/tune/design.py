"""The start-up design: the first trials cover every level of each unconditional categorical knob.

Left to TPE, 8 trials sampled ``norm=group`` 8 times of 8: BatchNorm vs GroupNorm was never
compared. So the search first enqueues ``m`` trials (the most levels any knob has), mixed-radix
(two-level knobs orthogonal where ``m`` rows allow), each factor's levels shuffled by the seed;
a conditional knob cycles through its levels; numeric ones are the sampler's.
"""

from __future__ import annotations

import random
from typing import Any

from tuner.tune.plan import SpaceProfile

__all__ = ["startup_design"]


def startup_design(
    profile: SpaceProfile, *, budget: int | None, seed: int = 0
) -> list[dict[str, Any]]:
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
