"""The probe budget: speed probes may take at most a share of the search's trial time.

Every trial earns ``share x its length`` of probe time into one pool that the experiment's
probe cache keeps (:meth:`tuner.speed.cache.ProbeCache.draw`): in advance, its predicted
length (its ``time_budget_s``, or its steps at the step time its first probe measured); when it
ends, its measured wall time replaces the prediction (:meth:`~tuner.speed.cache.ProbeCache.earn`).
A trial that probes draws the whole pool, spends what it needs, and gives back the rest (a run
that went over leaves a debt that later trials pay); a trial whose speed settings are cached
spends nothing and leaves its share to later ones. So the probes of a search spend at most
``share`` of its trials' time (and one probe run over: a run is not stopped half-way), the first
trial is never held up longer than its own share allows, and a costly knob (compile's first
build) waits until trials have earned enough.

Before each probe run the budget predicts its cost (the same arm's slowest run so far, else
the slowest run of any arm; a slow-to-build knob at least :data:`SLOW_BUILD_PRIOR_S`): a run
that does not fit is not started, and its knob is recorded as *not probed* (it keeps its
default), never as tried and lost. A later trial of the same settings probes what is left.

A session's first run is predicted from the runs the search has seen (:func:`predicted_run_s`:
trials' own runs of the same model, data and precision, scaled to the batch size; else the
slowest probe run so far). With nothing seen yet it is not started, unless the trial's length
waits for it: a cold search's first trial trains with the defaults and tells the next ones what
a run costs. Measured: without that rule the first probe run of a cold CPU search (bf16, batch
256: 2-3 s a step) took 18-29 s of a 2.4 s budget (reports/benchmarks/cold_search.md).
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
    """How long the trial trains: its time budget, or its steps (of its step or image budget)
    at ``step_time_s``, whichever is shorter; ``None`` while that is not known (steps, and no
    step time yet: a time budget far longer than the steps take would overstate it)."""
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
    """What one run of ``config`` (a TrainConfig's dict) cost, as plain data for the probe
    cache: its setup, and one training image's share of a step."""
    alike = {name: config[name] for name in _ALIKE}
    return {**alike, "setup_s": setup_s, "image_s": step_time_s / config["batch_size"]}


def predicted_run_s(
    costs: list[dict[str, Any]], config: Mapping[str, Any], steps: int, *, alike: bool = True
) -> float | None:
    """A probe run of ``config`` (a TrainConfig's dict: its warm-up and ``steps`` measured
    steps), predicted from the costs of alike runs (``alike=False``: of any run), the slowest,
    or ``None`` without one."""
    runs = [c for c in costs if not alike or all(c.get(k) == config[k] for k in _ALIKE)]
    done = config["warmup_steps"] + steps
    batch = config["batch_size"]
    return max((c["setup_s"] + done * c["image_s"] * batch for c in runs), default=None)


@dataclass
class ProbeBudget:
    """The probe seconds one trial may spend: ``granted`` (drawn from the search's pool, this
    trial's own share included when its length was known), plus ``share x`` its length once a
    first probe run measured its step time (``earn_later``). ``None`` seconds: unbounded."""

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
        """The most that may be left to spend: :attr:`left_s`, or, while the trial's length
        waits for the first run's step time, what its time budget would earn at most (its
        length is at most that budget); unbounded for a trial of steps alone (its length grows
        with the step time the run measures)."""
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
        """Whether ``runs`` more runs, each at the slowest run so far (else the prior), are
        predicted to fit in what is left (unknown cost or no bound: yes)."""
        per_run = self.slowest_run_s or self.prior_run_s
        if self.granted_s is None or per_run is None:
            return True
        return runs * per_run <= self.left_s

    def charge(self, arm: str, seconds: float, step_time_s: float | None) -> None:
        """Count one probe run; the first one tells a trial without a time budget its length."""
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
