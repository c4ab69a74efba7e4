"""Speed settings: the one owner of the speed probes (README, "Speed settings").

A *probe* here, and only here, is a short interleaved measurement of the accuracy-neutral speed
knobs (set_to_none, channels_last, fused AdamW, loader workers, pinned memory, the prefetchers,
compile) that settles which of them a training config runs with. This package owns choosing
(:mod:`tuner.speed.choose`: the arms and the rounds), the decision rule
(:mod:`tuner.speed.rule`), the probe budget (:mod:`tuner.speed.budget`), and remembering
(:mod:`tuner.speed.cache`: the experiment's cache, shared by its trials;
:mod:`tuner.speed.machine_cache`: across experiments on one machine). The engine's short runs
it measures with are :func:`tuner.engine.short_run`; the search's check that a run fits the
memory budget is the *feasibility check*, not a probe.
"""

from __future__ import annotations

from tuner.speed.budget import DEFAULT_SHARE, ProbeBudget, trial_length_s
from tuner.speed.choose import Scope, choose_speed, speed_key
from tuner.speed.rule import RULE, SpeedChoice, combination, decide, merged, settle

__all__ = [
    "DEFAULT_SHARE",
    "RULE",
    "ProbeBudget",
    "Scope",
    "SpeedChoice",
    "choose_speed",
    "combination",
    "decide",
    "merged",
    "settle",
    "speed_key",
    "trial_length_s",
]
