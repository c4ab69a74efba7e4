"""Every controlled measurement: arms (:class:`Arm`) measured by :func:`interleave`, the one loop
(every arm once per round after discarded warm-ups, so a shared machine's drift hits all alike
and a round's arms are a pair), paired and summarized by :mod:`tuner.measure` (re-exported).
Its users, one module each (they pull in torch, this core does not): docs/architecture.md.
"""

from __future__ import annotations

from tuner.compare._arms import (
    PLAIN,
    PLAIN_LOADER,
    REFERENCE,
    Arm,
    plain_loop,
    plan_ladder,
    plan_toggles,
)
from tuner.compare._interleave import check_repeats, interleave, run_interleaved
from tuner.measure import paired, summarize  # the measurement helpers, beside tuner.stats

__all__ = [
    "PLAIN",
    "PLAIN_LOADER",
    "REFERENCE",
    "Arm",
    "check_repeats",
    "interleave",
    "paired",
    "plain_loop",
    "plan_ladder",
    "plan_toggles",
    "run_interleaved",
    "summarize",
]
