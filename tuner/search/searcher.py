"""Ray's ``OptunaSearch``, telling Optuna the truth in a form Optuna's own tools read.

- The study's objectives are named (``images_per_second``, ``val_accuracy``) and the space,
  workload and hardware are study user attributes.
- Every trial carries its Ray trial id and its measurements as user attributes.
- A trial that measured its objectives is told COMPLETE with them, infeasible or not, and its
  memory constraint is written both where Optuna >= 5's samplers read it
  (``Trial.set_constraint``) and where optuna-dashboard and older Optuna read it (the
  ``constraints`` system attribute), so an over-budget trial ranks behind feasible ones and
  ``study.best_trials`` never holds it.
- A trial that early stopping ended (its last report is not final) is PRUNED: its accuracy so
  far is not its accuracy, so the sampler must not learn it as one.
- A trial that errored is FAIL. A trial over the memory budget (or OOM) is COMPLETE with what
  it measured and :data:`NO_MEASUREMENT` (0, the worst value of both
  maximized objectives) for what it never measured (its accuracy: it was stopped before
  training), with its violation > 0, so the sampler learns the infeasible region and no client
  reads it as best.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any

import optuna
from ray.tune.search.optuna import OptunaSearch

from tuner.experiment import STUDY_TRIAL_ID_ATTR
from tuner.record import MEMORY_VIOLATION as MEMORY_VIOLATION_KEY
from tuner.search.samplers import SETS_CONSTRAINTS
from tuner.units import finite_or_none

__all__ = [
    "RAY_TRIAL_ID_ATTR",
    "STUDY_ATTR_KEYS",
    "ConstrainedOptunaSearch",
    "constraint_arguments",
    "measured_violation",
]

RAY_TRIAL_ID_ATTR = STUDY_TRIAL_ID_ATTR
# What Optuna is told for an objective an infeasible trial never measured (the accuracy of a
# trial stopped by its feasibility check; anything of an OOM before its first step): 0 is the
# worst value of both maximized objectives, so no client reads it as a best trial, and the
# trial's memory violation > 0 makes it infeasible to Optuna.
NO_MEASUREMENT = 0.0
STUDY_ATTR_KEYS = (
    MEMORY_VIOLATION_KEY,
    "final",  # the trial's last report was its final one (not stopped early)
    "feasible",
    "infeasible_reason",
    "status",
    "phase",
    "error",
    "peak_memory_bytes",
    "memory_kind",
    "images_per_second",
    "val_accuracy",
    "engine_time_s",
    "node",
)
_LEGACY_CONSTRAINTS_KEY = "constraints"  # optuna-dashboard and Optuna < 5 read this list
_CONSTRAINT = "memory"  # the constraint's name for Trial.set_constraint (Optuna >= 5)


class ConstrainedOptunaSearch(OptunaSearch):
    """``OptunaSearch`` whose Optuna trials carry their measurements and memory constraint.

    Args:
        study_attrs: user attributes of the study (space, workload, hardware).
        *args, **kwargs: as :class:`ray.tune.search.optuna.OptunaSearch`.
    """

    def __init__(
        self, *args: Any, study_attrs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        self._study_attrs = dict(study_attrs or {})
        super().__init__(*args, **kwargs)

    def _setup_study(self, mode: str | list) -> None:
        super()._setup_study(mode)
        names = self._metric if isinstance(self._metric, list) else [self._metric]
        with contextlib.suppress(AttributeError):  # set_metric_names: Optuna >= 3.2
            self._ot_study.set_metric_names([str(n) for n in names])
        for key, value in self._study_attrs.items():
            self._ot_study.set_user_attr(key, value)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        config = super().suggest(trial_id)
        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is not None:
            ot_trial.set_user_attr(RAY_TRIAL_ID_ATTR, trial_id)
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is None or trial_id in self._completed_trials:
            return super().on_trial_complete(trial_id, result=result, error=error)
        self._completed_trials.add(trial_id)
        if self._ot_study._storage.get_trial(ot_trial._trial_id).state.is_finished():
            return None  # told before the driver died; Ray's older snapshot re-ran it
        result = result or {}
        for key in STUDY_ATTR_KEYS:
            if key in result:
                ot_trial.set_user_attr(key, _plain(result[key]))
        values = self._values(result)
        errored = error or result.get("status") == "error"
        stopped = not errored and result.get("final") is False  # early stopping ended it
        # GridSampler calls Study.stop() at the grid's end (RuntimeError); the state is set.
        with contextlib.suppress(RuntimeError):
            if stopped:
                ot_trial.set_user_attr("stopped_early", True)
                self._ot_study.tell(ot_trial, state=optuna.trial.TrialState.PRUNED)
            elif values is None or errored:
                self._ot_study.tell(ot_trial, state=optuna.trial.TrialState.FAIL)
            else:
                self._constrain(ot_trial, float(result.get(MEMORY_VIOLATION_KEY, -1.0)))
                self._ot_study.tell(ot_trial, values)
        return None

    def _values(self, result: Mapping[str, Any]) -> list[float] | None:
        """The objectives to tell, or ``None`` when the trial has nothing to tell."""
        names = self._metric if isinstance(self._metric, list) else [self._metric]
        values = [finite_or_none(result.get(name)) for name in names]
        if all(v is not None for v in values):
            return [float(v) for v in values]  # type: ignore[arg-type]
        if float(result.get(MEMORY_VIOLATION_KEY, -1.0)) > 0:  # over budget or OOM
            return [NO_MEASUREMENT if v is None else v for v in values]
        return None

    def _constrain(self, ot_trial: optuna.Trial, violation: float) -> None:
        storage = self._ot_study._storage
        storage.set_trial_system_attr(ot_trial._trial_id, _LEGACY_CONSTRAINTS_KEY, [violation])
        if SETS_CONSTRAINTS:
            ot_trial.set_constraint(_CONSTRAINT, violation)


def constraint_arguments(violation: float) -> dict[str, Any]:
    """``optuna.trial.create_trial`` keywords that give a trial its memory constraint where a
    live trial has it (:meth:`ConstrainedOptunaSearch._constrain`): for warm-started trials."""
    arguments: dict[str, Any] = {"system_attrs": {_LEGACY_CONSTRAINTS_KEY: [violation]}}
    if SETS_CONSTRAINTS:
        arguments["constraints"] = {_CONSTRAINT: violation}
    return arguments


def measured_violation(trial: optuna.trial.FrozenTrial) -> float | None:
    """The memory constraint a trial was told with (``None``: told without one)."""
    told = trial.system_attrs.get(_LEGACY_CONSTRAINTS_KEY)
    return float(told[0]) if told else None


def _plain(value: Any) -> Any:
    """A JSON-storable value: numpy scalars become Python, NaN becomes None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
