"""Ray's ``OptunaSearch``, telling Optuna the truth in a form its own tools read: named
objectives; each trial's measurements and kind as user attributes, in the state the record gives
that kind (only an ok trial is COMPLETE); the memory constraint where every Optuna client reads
it, so TPE ranks an over-budget trial infeasible and no front holds it."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from tuner import record
from tuner.experiment import STUDY_TRIAL_ID_ATTR
from tuner.experiment.limits import read_limits
from tuner.objectives import told_violation
from tuner.tune import _optuna_internals as optuna_internals
from tuner.tune.samplers import sets_constraints
from tuner.units import finite_or_none, json_ready

__all__ = [
    "ConstrainedOptunaSearch",
    "close_interrupted",
    "close_orphans",
    "constraint_arguments",
    "measured_violation",
    "requeue_not_run",
]

# What Optuna is told for an objective a COMPLETE (ok) trial did not report, which the engine
# never leaves out: 0 is the worst value of both maximized objectives, so no client reads it as
# a best trial.
_NO_MEASUREMENT = 0.0
_ENGINE_ATTRS = ("peak_memory_bytes", "memory_kind", "images_per_second", "val_accuracy")
# The report keys every Optuna trial carries as user attributes (the kind is added to them).
_STUDY_ATTR_KEYS: tuple[str, ...] = (
    record.MEMORY_VIOLATION,
    record.FINAL,
    record.FEASIBLE,
    record.INFEASIBLE_REASON,
    record.STATUS,
    record.PHASE,
    record.ERROR,
    *(record.ENGINE_KEYS[name].name for name in _ENGINE_ATTRS),  # a KeyError if one goes
    record.ENGINE_TIME_S,
    record.NODE,
    record.RETRIES,
    record.LAST_ERROR,
)
_LEGACY_CONSTRAINTS_KEY = "constraints"  # optuna-dashboard and Optuna < 5 read this list
_CONSTRAINT = "memory"  # the constraint's name for Trial.set_constraint (Optuna >= 5)
_NO_REPORT = "the trial's process failed before it reported; see error.txt in its folder"
_NOT_RUN = "the search ended before this trial started"
_NOT_RUN_YET = "the search was interrupted before this trial started (queued again on resume)"
# An Optuna trial closed when the search was interrupted while its Ray trial ran (FAIL, kind
# incomplete, as trials.csv reads it): a resume that goes on with the Ray trial tells its end
# on a new Optuna trial of the same parameters (Optuna reopens no finished trial).
_INTERRUPTED = "interrupted"
_RESUMES = "resumes_trial"  # the new trial's: the number of the interrupted one it goes on


class ConstrainedOptunaSearch(OptunaSearch):
    """``OptunaSearch`` whose trials carry their measurements and memory constraint, ending the
    search (``FINISHED``) at the limits in the metadata of ``experiment_dir``."""

    def __init__(
        self,
        *args: Any,
        study_attrs: Mapping[str, Any] | None = None,
        experiment_dir: Path | None = None,
        **kwargs: Any,
    ) -> None:
        self._study_attrs = dict(study_attrs or {})
        self._limits_dir = None if experiment_dir is None else str(experiment_dir)
        # Ray tells an errored trial's end without its result: its last one is kept here.
        self._last_results: dict[str, dict[str, Any]] = {}
        super().__init__(*args, **kwargs)

    @property
    def _metric_names(self) -> list[str]:
        return self.metric if isinstance(self.metric, list) else [self.metric]

    def _setup_study(self, mode: str | list) -> None:
        super()._setup_study(mode)
        study = optuna_internals.search_study(self)
        study.set_metric_names([str(n) for n in self._metric_names])
        for key, value in self._study_attrs.items():
            study.set_user_attr(key, value)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self._limits_reached():
            return Searcher.FINISHED
        config = super().suggest(trial_id)
        ot_trial = optuna_internals.search_trials(self).get(trial_id)
        if ot_trial is not None:
            ot_trial.set_user_attr(STUDY_TRIAL_ID_ATTR, trial_id)
        return config

    def _limits_reached(self) -> bool:
        """Read from the metadata at each ask: Ray restores this searcher as it pickled it, and
        a resume may have moved the limits."""
        folder = getattr(self, "_limits_dir", None)  # None: an older tuner's, Tune counts
        limits = read_limits(folder) if folder else None
        started = len(optuna_internals.search_trials(self))
        return limits is not None and limits.ended(started=started, now_unix_s=time.time())

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self._last_results[trial_id] = result
        self._reopen_if_interrupted(trial_id)
        super().on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        self._reopen_if_interrupted(trial_id)
        ot_trial = optuna_internals.search_trials(self).get(trial_id)
        last = self._last_results.pop(trial_id, None)
        told = optuna_internals.search_told(self)
        if ot_trial is None or trial_id in told:
            return super().on_trial_complete(trial_id, result=result, error=error)
        told.add(trial_id)
        study = optuna_internals.search_study(self)
        if optuna_internals.stored_trial(study, ot_trial).state.is_finished():
            return None  # told before the driver died; Ray's older snapshot re-ran it
        result = result or last or {}
        kind = record.classify(result, ended=True, crashed=error)
        _describe(ot_trial.set_user_attr, result, kind)
        state = optuna.trial.TrialState[record.optuna_state(kind)]
        # GridSampler calls Study.stop() at the grid's end (RuntimeError); the state is set.
        with contextlib.suppress(RuntimeError):
            if state != optuna.trial.TrialState.FAIL:  # over budget: PRUNED, infeasible
                self._constrain(ot_trial, told_violation(result.get(record.MEMORY_VIOLATION)))
            if state == optuna.trial.TrialState.COMPLETE:
                values = [finite_or_none(result.get(name)) for name in self._metric_names]
                study.tell(ot_trial, [_NO_MEASUREMENT if v is None else v for v in values])
            else:
                study.tell(ot_trial, state=state)
        return None

    def _reopen_if_interrupted(self, trial_id: str) -> None:
        """A Ray trial going on after a resume whose Optuna trial an interrupt closed: a new
        RUNNING Optuna trial of the same parameters takes its place (a finished one is never
        updated again)."""
        trials, study = optuna_internals.search_trials(self), optuna_internals.search_study(self)
        ot_trial = trials.get(trial_id)
        if ot_trial is None:
            return
        closed = optuna_internals.stored_trial(study, ot_trial)
        if not (closed.state.is_finished() and closed.user_attrs.get(_INTERRUPTED)):
            return
        template = optuna.trial.create_trial(
            state=optuna.trial.TrialState.RUNNING,
            params=closed.params,
            distributions=closed.distributions,
            user_attrs={STUDY_TRIAL_ID_ATTR: trial_id, _RESUMES: closed.number},
            system_attrs=closed.system_attrs,
        )
        trials[trial_id] = optuna_internals.new_running_trial(study, template)

    def _constrain(self, ot_trial: optuna.Trial, violation: float) -> None:
        study = optuna_internals.search_study(self)
        optuna_internals.set_system_attr(study, ot_trial, _LEGACY_CONSTRAINTS_KEY, [violation])
        if sets_constraints():
            ot_trial.set_constraint(_CONSTRAINT, violation)


def constraint_arguments(violation: float) -> dict[str, Any]:
    """``create_trial`` keywords giving a warm-started trial its constraint as a live one has it."""
    arguments: dict[str, Any] = {"system_attrs": {_LEGACY_CONSTRAINTS_KEY: [violation]}}
    if sets_constraints():
        arguments["constraints"] = {_CONSTRAINT: violation}
    return arguments


def measured_violation(trial: optuna.trial.FrozenTrial) -> float | None:
    told = trial.system_attrs.get(_LEGACY_CONSTRAINTS_KEY)
    return float(told[0]) if told else None


def close_orphans(
    study_name: str,
    study_url: str,
    ray_ids: set[str],
    cut: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[int]:
    """Close the Optuna trials no Ray trial will finish (FAIL); return the orphans' numbers.
    ``cut``: the last report of each Ray trial the search's end stopped, which Ray tells the
    searcher nothing of: told here as incomplete. WAITING trials: FAIL, ``not_run``."""
    study = optuna.load_study(study_name=study_name, storage=study_url)
    cut = cut or {}
    closed = []
    running = (optuna.trial.TrialState.RUNNING,)
    for frozen in study.get_trials(deepcopy=False, states=running):
        ray_id = frozen.user_attrs.get(STUDY_TRIAL_ID_ATTR)
        if ray_id in cut:
            _tell_incomplete(study, frozen, cut[ray_id])
            continue
        if ray_id in ray_ids:
            continue  # its Ray trial finished; the searcher told it already or will not
        optuna_internals.set_user_attr(study, frozen, "orphaned", True)
        study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
        closed.append(frozen.number)
    _close_waiting(study, _NOT_RUN)
    return closed


def close_interrupted(study_name: str, study_url: str) -> None:
    """After Ctrl-C or SIGTERM the study says what trials.csv says: a RUNNING trial is FAIL,
    incomplete, until a resume goes on with it; a WAITING one FAIL, not run, queued again by
    the resume."""
    study = optuna.load_study(study_name=study_name, storage=study_url)
    running = (optuna.trial.TrialState.RUNNING,)
    for frozen in study.get_trials(deepcopy=False, states=running):
        optuna_internals.set_user_attr(study, frozen, record.KIND, "incomplete")
        optuna_internals.set_user_attr(study, frozen, _INTERRUPTED, True)
        study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
    _close_waiting(study, _NOT_RUN_YET)


def _close_waiting(study: optuna.Study, why: str) -> None:
    """The start-up design's trials never asked (WAITING): FAIL, ``not_run`` saying ``why``."""
    for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
        optuna_internals.set_user_attr(study, frozen, "not_run", why)
        optuna_internals.set_state(study, frozen, optuna.trial.TrialState.FAIL)


def requeue_not_run(study_name: str, study_url: str, *, interrupted_only: bool = False) -> int:
    """Queue again the start-up design's rows an earlier end closed as not run (and no trial of
    which was asked or queued since); return how many. ``interrupted_only``: only those an
    interrupt closed (a resume whose limits did not move)."""
    study = optuna.load_study(study_name=study_name, storage=study_url)
    not_run: list[dict[str, Any]] = []
    taken: list[dict[str, Any]] = []
    for frozen in study.get_trials(deepcopy=False):
        row = frozen.system_attrs.get(_FIXED_PARAMS)
        if row is None:
            continue
        why = frozen.user_attrs.get("not_run")
        closed = frozen.state == optuna.trial.TrialState.FAIL and why is not None
        if closed and interrupted_only and why != _NOT_RUN_YET:
            closed = False  # the search's end closed it: it stays closed
        (not_run if closed else taken).append(row)
    rows = [row for i, row in enumerate(not_run) if row not in taken and row not in not_run[:i]]
    for row in rows:
        study.enqueue_trial(row)
    return len(rows)


_FIXED_PARAMS = "fixed_params"  # Optuna's system attribute of an enqueued trial: its row


def _tell_incomplete(
    study: optuna.Study, frozen: optuna.trial.FrozenTrial, result: Mapping[str, Any]
) -> None:
    kind = record.classify(result, ended=result.get(record.FINAL) is True)
    _describe(functools.partial(optuna_internals.set_user_attr, study, frozen), result, kind)
    study.tell(frozen.number, state=optuna.trial.TrialState[record.optuna_state(kind)])


def _describe(set_attr: Callable[[str, Any], None], result: Mapping[str, Any], kind: str) -> None:
    """A trial's user attributes: its measurements, its kind and, failed, why."""
    for key in _STUDY_ATTR_KEYS:
        if key in result:
            set_attr(key, json_ready(result[key]))
    set_attr(record.KIND, kind)
    if kind == "errored" and not result.get(record.ERROR):
        set_attr(record.ERROR, _NO_REPORT)
