"""Speed settings: the one owner of the speed probes (README, "Speed settings"; a *probe* is a
short interleaved measurement of the accuracy-neutral knobs, nothing else): choosing, the
rule, the probe budget and remembering (per experiment and per machine).
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
