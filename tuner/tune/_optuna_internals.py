"""Every private Optuna use of tuner: the study's storage, written by trial id, and the
protected members of Ray's ``OptunaSearch`` (its study and trials).

Optuna's public API writes a trial only through a live ``optuna.Trial`` this process asked for,
and ``study.tell`` takes a RUNNING trial only; the search also writes trials an earlier run left
RUNNING or WAITING, a resumed trial's new one, and the legacy constraints attribute.
``tests/tune/test_optuna_internals.py`` runs each against the installed Optuna and Ray.
"""

from __future__ import annotations

from typing import Any

import optuna
from ray.tune.search.optuna import OptunaSearch

__all__ = [
    "new_running_trial",
    "search_study",
    "search_told",
    "search_trials",
    "set_state",
    "set_system_attr",
    "set_user_attr",
    "stored_trial",
]

Trial = optuna.Trial | optuna.trial.FrozenTrial


def _trial_id(trial: Trial) -> int:
    # The storage's key. A FrozenTrial has a public ``number`` but no public id, and a storage
    # maps a number to its id only through its own (also private) study id.
    return trial._trial_id


def stored_trial(study: optuna.Study, trial: Trial) -> optuna.trial.FrozenTrial:
    """The trial as the storage holds it now (``study.get_trials`` reads every trial for it)."""
    return study._storage.get_trial(_trial_id(trial))


def set_user_attr(study: optuna.Study, trial: Trial, key: str, value: Any) -> None:
    """On any unfinished trial (``FrozenTrial.set_user_attr`` changes the copy in memory only)."""
    study._storage.set_trial_user_attr(_trial_id(trial), key, value)


def set_system_attr(study: optuna.Study, trial: Trial, key: str, value: Any) -> None:
    """``Trial.set_system_attr`` was removed in Optuna 3 (the legacy ``constraints`` is one)."""
    study._storage.set_trial_system_attr(_trial_id(trial), key, value)


def set_state(study: optuna.Study, trial: Trial, state: optuna.trial.TrialState) -> None:
    """A WAITING trial closed: ``study.tell`` refuses any trial that is not RUNNING."""
    study._storage.set_trial_state_values(_trial_id(trial), state)


def new_running_trial(study: optuna.Study, template: optuna.trial.FrozenTrial) -> optuna.Trial:
    """A RUNNING copy of ``template`` this process can tell: ``study.add_trial`` takes finished
    trials only, ``study.ask`` samples new params."""
    new_id = study._storage.create_new_trial(study._study_id, template_trial=template)
    return optuna.Trial(study, new_id)


def search_study(search: OptunaSearch) -> optuna.Study:
    return search._ot_study


def search_trials(search: OptunaSearch) -> dict[str, optuna.Trial]:
    """Ray trial id -> its Optuna trial (the search's own dict: a trial set here is told)."""
    return search._ot_trials


def search_told(search: OptunaSearch) -> set[str]:
    return search._completed_trials
