"""The probe budget: speed probes may take at most a share of the search's trial time.

Every trial earns ``share x its length`` into one pool (the probe cache's): in advance its
predicted length, replaced by its measured wall time when it ends. A trial that probes draws
the whole pool and gives back the rest (a run over leaves a debt later trials pay); a cached
one leaves its share to later ones. So the probes spend at most ``share`` of the trials' time
(plus one run: none is stopped half-way), and a costly knob (compile) waits until enough is
earned. Each run's cost is predicted first (the arm's slowest run, else any arm's; a slow build
at least :data:`SLOW_BUILD_PRIOR_S`); one that does not fit is not started, its knob *not
probed*. A session's first run is predicted from alike runs the search saw
(:func:`predicted_run_s`); with none it is not started unless the trial's length waits for it:
without that rule a cold CPU search's first probe run took 18-29 s of a 2.4 s budget
(reports/benchmarks/cold_search.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.config import TrainConfig

__all__ = [
    "DEFAULT_SHARE",
    "SLOW_BUILD_PRIOR_S",
    "ProbeBudget",
    "predicted_run_s",
    "run_cost",
    "trial_length_s",
]

DEFAULT_SHARE = 0.2  # of the trials' time (--probe-share)
# A knob slow to build (torch.compile) before its first probe run: compile's first build of
# ViT-B/16 took 34 s on an H100 (reports/examples/gpu-nvidia-h100-80gb-hbm3/).
SLOW_BUILD_PRIOR_S = 30.0


def trial_length_s(config: TrainConfig, step_time_s: float | None) -> float | None:
    """How long the trial trains: the shorter of its time budget and its steps at
    ``step_time_s``; ``None`` while its steps' time is unknown (the budget would overstate)."""
    steps = config.step_limit()
    steps_known = step_time_s is not None and math.isfinite(step_time_s)
    if steps is not None and not steps_known:
        return None
    lengths = []
    if config.time_budget_s is not None:
        lengths.append(float(config.time_budget_s))
    if steps is not None and steps_known:
        lengths.append(steps * step_time_s)  # type: ignore[operator]
    return min(lengths) if lengths else None


# What makes one run's step time a prior for another's, besides the batch size it scales with.
_ALIKE = ("model", "model_kwargs", "data", "img_size", "amp", "device")


def run_cost(config: Mapping[str, Any], setup_s: float, step_time_s: float) -> dict[str, Any]:
    """What one run of ``config`` (a dict) cost: its setup, and one image's share of a step."""
    alike = {name: config[name] for name in _ALIKE}
    return {**alike, "setup_s": setup_s, "image_s": step_time_s / config["batch_size"]}


def predicted_run_s(
    costs: list[dict[str, Any]], config: Mapping[str, Any], steps: int, *, alike: bool = True
) -> float | None:
    """A probe run of ``config`` (a dict: warm-up and ``steps``) predicted from the slowest
    alike run's cost (``alike=False``: any run's); ``None`` without one."""
    runs = [c for c in costs if not alike or all(c.get(k) == config[k] for k in _ALIKE)]
    done = config["warmup_steps"] + steps
    batch = config["batch_size"]
    return max((c["setup_s"] + done * c["image_s"] * batch for c in runs), default=None)


@dataclass
class ProbeBudget:
    """The probe seconds one trial may spend: ``granted`` from the pool (None: unbounded), plus
    ``share x`` its length once a first run measured its step time (``earn_later``)."""

    granted_s: float | None
    share: float = DEFAULT_SHARE
    earn_later: TrainConfig | None = None  # the trial's config, when its length needs a step time
    prior_run_s: float | None = None  # the first run's predicted cost (module doc)
    spent_s: float = 0.0
    earned_late_s: float = 0.0
    runs: dict[str, float] = field(default_factory=dict)  # arm name -> its slowest run (s)

    @property
    def allowed_s(self) -> float:
        """What it may spend: nothing while the pool is in debt."""
        if self.granted_s is None:
            return math.inf
        return max(0.0, self.granted_s + self.earned_late_s)

    @property
    def left_s(self) -> float:
        return self.allowed_s - self.spent_s

    @property
    def most_left_s(self) -> float:
        """:attr:`left_s`, or, while the trial's length waits for a step time, what its time
        budget would earn at most (unbounded for a trial of steps alone)."""
        if self.earn_later is None or self.granted_s is None:
            return self.left_s
        budget_s = self.earn_later.time_budget_s
        if budget_s is None:
            return math.inf
        return max(0.0, self.granted_s + self.share * float(budget_s)) - self.spent_s

    def allows(self, arm: str, *, slow_build: bool = False) -> bool:
        """Whether a run of ``arm`` is predicted to fit in what is left."""
        if self.granted_s is None:
            return True
        if not self.runs:  # the first run (the plain setting), when it is predicted to fit
            if self.prior_run_s is not None:  # worth it only with a knob to measure after it
                return 2 * self.prior_run_s <= self.left_s
            # Nothing predicts it (module doc): only a trial whose length waits for this run's
            # step time runs it, unless the pool is in debt (an earlier run went over).
            return self.earn_later is not None and self.granted_s >= 0
        predicted = self.runs.get(arm, max(self.runs.values()))
        if slow_build and arm not in self.runs:
            predicted = max(predicted, SLOW_BUILD_PRIOR_S)
        return predicted <= self.left_s

    def affords(self, runs: int) -> bool:
        """Whether ``runs`` more runs at the slowest so far (else the prior) fit what is left."""
        per_run = self.slowest_run_s or self.prior_run_s
        if self.granted_s is None or per_run is None:
            return True
        return runs * per_run <= self.left_s

    def charge(self, arm: str, seconds: float, step_time_s: float | None) -> None:
        """Count one probe run (the first tells a trial of steps its length)."""
        first = not self.runs
        self.spent_s += seconds
        self.runs[arm] = max(self.runs.get(arm, 0.0), seconds)
        if first and self.earn_later is not None:
            length = trial_length_s(self.earn_later, step_time_s)
            self.earned_late_s = self.share * (length or 0.0)
            self.earn_later = None

    @property
    def slowest_run_s(self) -> float | None:
        return max(self.runs.values()) if self.runs else None
