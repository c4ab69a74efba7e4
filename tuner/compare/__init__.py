"""Every controlled measurement: arms measured interleaved, paired by repeat, told as ratios.

One mechanism serves the technique ladder of ``tuner bench`` and ``tuner ablate``, the norm
comparison, the speed probes of a trial, the re-measurement and the technique effects after a
search, and the fidelity self-check:

1. Arms (:class:`Arm`, :func:`plan_ladder`, :func:`plan_toggles`) say what each changes and
   which arm it is compared with (its *reference*: the rung before, the plain loop, the
   recommended config).
2. :func:`interleave` is the one loop: every arm once per round (A, B, A, B, ...), after
   discarded warm-up measurements, so a drift of a shared machine hits every arm alike and the
   arms of one round form a pair. :func:`run_interleaved` runs it on engine measurements and
   keeps one row per measurement.
3. :func:`paired` is the one pairing (the finished repeats of two arms, aligned on the repeat);
   :func:`summarize` gives each arm's median with its interval and, against its reference and
   its baseline, the paired ratio of images/s and the paired difference of peak memory and
   accuracy, each with its interval and a tie flag (:mod:`tuner.stats`). An arm whose change did
   not take effect on this hardware is marked ``fell_back``, not reported as an effect.

Built on it, one public module each (imported by name; they pull in torch, this core does not):
:mod:`~tuner.compare.speed` (a trial's speed probes), :mod:`~tuner.compare.trust` (the
measuring half of re-measurement and technique effects; their Ray tasks live in
:mod:`tuner.search.after_search`), :mod:`~tuner.compare.bench` (``tuner bench``),
:mod:`~tuner.compare.ablation` (``tuner ablate``), :mod:`~tuner.compare.fidelity` (``tuner bench
--verify``) and :mod:`~tuner.compare.minimal_loop` (its reference, which imports nothing from
tuner).
"""

from __future__ import annotations

from tuner.compare._arms import PLAIN, REFERENCE, Arm, plain_loop, plan_ladder, plan_toggles
from tuner.compare._interleave import (
    check_repeats,
    fallbacks,
    interleave,
    paired,
    run_interleaved,
)
from tuner.compare._summary import summarize

__all__ = [
    "PLAIN",
    "REFERENCE",
    "Arm",
    "check_repeats",
    "fallbacks",
    "interleave",
    "paired",
    "plain_loop",
    "plan_ladder",
    "plan_toggles",
    "run_interleaved",
    "summarize",
]
