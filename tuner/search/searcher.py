"""Ray's ``OptunaSearch`` with the memory constraint and the Ray trial id attached to Optuna.

``OptunaSearch`` tells Optuna only the objective values. Before it does, this subclass writes
the trial's measurements (``memory_violation``, feasibility, peak memory, throughput, accuracy)
as user attributes, which the sampler's ``constraints_func`` reads, and it tells an errored
trial as FAIL even when an earlier report carried objective values.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import optuna
from ray.tune.search.optuna import OptunaSearch

from tuner.search.metrics import MEMORY_VIOLATION_KEY
from tuner.search.samplers import SETS_CONSTRAINTS

__all__ = ["RAY_TRIAL_ID_ATTR", "STUDY_ATTR_KEYS", "ConstrainedOptunaSearch"]

RAY_TRIAL_ID_ATTR = "ray_trial_id"
STUDY_ATTR_KEYS = (
    MEMORY_VIOLATION_KEY,
    "feasible",
    "infeasible_reason",
    "status",
    "phase",
    "error",
    "peak_memory_bytes",
    "images_per_second",
    "val_accuracy",
    "engine_time_s",
    "node",
)


class ConstrainedOptunaSearch(OptunaSearch):
    """``OptunaSearch`` whose Optuna trials carry the measured memory violation."""

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
        if self._ot_study._storage.get_trial(ot_trial._trial_id).state.is_finished():
            # Told before the driver died; Ray's older snapshot re-ran it on --resume.
            self._completed_trials.add(trial_id)
            return None
        if result:
            for key in STUDY_ATTR_KEYS:
                if key in result:
                    ot_trial.set_user_attr(key, _plain(result[key]))
        if result and not error and SETS_CONSTRAINTS and MEMORY_VIOLATION_KEY in result:
            ot_trial.set_constraint("memory", float(result[MEMORY_VIOLATION_KEY]))
        if error:
            # GridSampler calls Study.stop() at the grid's end (RuntimeError); the state is set.
            with contextlib.suppress(RuntimeError):
                self._ot_study.tell(ot_trial, state=optuna.trial.TrialState.FAIL)
            self._completed_trials.add(trial_id)
            return None
        return super().on_trial_complete(trial_id, result=result, error=error)


def _plain(value: Any) -> Any:
    """A JSON-storable value: numpy scalars become Python, NaN becomes None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
