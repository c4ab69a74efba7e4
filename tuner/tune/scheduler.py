"""The Ray Tune scheduler for multi-objective searches (:class:`tuner.tune.halving.ParetoHalving`
judges each report)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ray.air.constants import TRAINING_ITERATION
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from tuner.experiment.options import SearchOptions
from tuner.record import FEASIBLE, FINAL
from tuner.tune.halving import ParetoHalving
from tuner.units import as_number

__all__ = ["ParetoASHA", "early_stopping_name"]


class ParetoASHA(FIFOScheduler):
    """``max_reports``: the evaluations a full trial makes, from which the rungs follow."""

    def __init__(
        self, *, metrics: Sequence[str], directions: Sequence[str], max_reports: int | None = None
    ) -> None:
        super().__init__()
        self.metrics = list(metrics)
        self.core = ParetoHalving.for_trials_of(directions, max_reports)
        self.stopped: list[str] = []

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if result.get(FINAL, True) or TRAINING_ITERATION not in result:
            return TrialScheduler.CONTINUE  # a final report has nothing left to stop
        values = [as_number(result.get(m)) for m in self.metrics]
        feasible = bool(result.get(FEASIBLE, True))
        report = int(result[TRAINING_ITERATION])
        if self.core.continues(trial.trial_id, report, values, feasible):
            return TrialScheduler.CONTINUE
        self.stopped.append(trial.trial_id)
        return TrialScheduler.STOP

    def debug_string(self) -> str:
        return f"ParetoASHA: {len(self.stopped)} stopped, rungs {self.core.rungs()}"


def early_stopping_name(options: SearchOptions) -> str | None:
    if not options.early_stopping:
        return None
    if options.multi_objective:
        return (
            "pareto-asha (eta 3, first rung after a third of the evaluations; every 4th trial "
            "in a second bracket, its rungs eta times later)"
        )
    return "asha"
