"""Every controlled measurement: arms measured interleaved, paired by repeat, told as ratios.

Arms (:class:`Arm`) say what each changes and which arm it is compared with;
:func:`interleave` is the one loop (every arm once per round, after discarded warm-ups, so a
drift of a shared machine hits every arm alike and the arms of one round form a pair);
:func:`paired` is the one pairing; :func:`summarize` gives medians and paired changes with
intervals (both :mod:`tuner.measure`'s, re-exported here). Its users, one public module each
(they pull in torch, this core does not), are mapped in docs/architecture.md ("Measurements").
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
