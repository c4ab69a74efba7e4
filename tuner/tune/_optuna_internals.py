"""Every private Optuna use of tuner, in one place: the study's storage, written by trial id,
and the members of Ray's ``OptunaSearch`` that its subclass reads (its study and trials).

Optuna's public API writes a trial only through a live ``optuna.Trial`` that this process asked
for (``trial.set_user_attr``, ``study.tell``), and ``study.tell`` takes a RUNNING trial only.
The search also writes trials it did not ask for in this process: those a crashed or
interrupted run left RUNNING or WAITING (closed, described), and a resumed trial's new Optuna
trial; and the searcher keeps the memory constraint where Optuna < 5 and optuna-dashboard read
it (a system attribute). Each of those goes through the storage, keyed by the trial's private
id. ``OptunaSearch`` offers its study and its trials (Ray trial id -> Optuna trial) in
protected members only. ``tests/tune/test_optuna_internals.py`` runs each against the installed
Optuna and Ray, and fails with the version named when an upgrade breaks one.
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
    """The trial as the storage holds it now (another process may have finished it); the
    public ``study.get_trials`` reads every trial for it."""
    return study._storage.get_trial(_trial_id(trial))


def set_user_attr(study: optuna.Study, trial: Trial, key: str, value: Any) -> None:
    """A user attribute on any unfinished trial of the study, not only one this process asked
    for (``FrozenTrial.set_user_attr`` changes the copy in memory only)."""
    study._storage.set_trial_user_attr(_trial_id(trial), key, value)


def set_system_attr(study: optuna.Study, trial: Trial, key: str, value: Any) -> None:
    """A system attribute (``Trial.set_system_attr`` was removed in Optuna 3: the legacy
    ``constraints`` list of Optuna < 5 and optuna-dashboard is one)."""
    study._storage.set_trial_system_attr(_trial_id(trial), key, value)


def set_state(study: optuna.Study, trial: Trial, state: optuna.trial.TrialState) -> None:
    """A WAITING trial (enqueued, never asked) closed: ``study.tell`` refuses any trial that is
    not RUNNING."""
    study._storage.set_trial_state_values(_trial_id(trial), state)


def new_running_trial(study: optuna.Study, template: optuna.trial.FrozenTrial) -> optuna.Trial:
    """A new RUNNING trial copied from ``template`` (params, attributes) that this process can
    tell: ``study.add_trial`` takes finished trials only, ``study.ask`` samples new params."""
    new_id = study._storage.create_new_trial(study._study_id, template_trial=template)
    return optuna.Trial(study, new_id)


def search_study(search: OptunaSearch) -> optuna.Study:
    """The study the search asks and tells, once its ``_setup_study`` (which
    ``ConstrainedOptunaSearch`` extends) made it."""
    return search._ot_study


def search_trials(search: OptunaSearch) -> dict[str, optuna.Trial]:
    """Ray trial id -> the Optuna trial asked for it: every one this search asked, a restored
    search's too (it pickles them); the search's own dict, so a trial set here is the one
    told from then on."""
    return search._ot_trials


def search_told(search: OptunaSearch) -> set[str]:
    """The Ray trial ids whose end the search told its study (its own set, added to here)."""
    return search._completed_trials
