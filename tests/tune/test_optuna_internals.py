"""Every private Optuna use (tuner/tune/_optuna_internals.py) against the installed Optuna, on a
real SQLite study: an upgrade that breaks one fails here, naming the Optuna version."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from adapters import adapter_guard

from tuner.tune import _optuna_internals as internals

FAIL = optuna.trial.TrialState.FAIL


_adapter = adapter_guard("Optuna", optuna.__version__, "_optuna_internals.py")


@pytest.fixture
def study(tmp_path: Path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="s")


def test_attributes_of_a_trial_this_process_did_not_ask_for(study: optuna.Study) -> None:
    study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    (frozen,) = study.get_trials()  # a copy: a FrozenTrial, as a resumed search reads them
    with _adapter("set_user_attr / set_system_attr / stored_trial"):
        internals.set_user_attr(study, frozen, "kind", "incomplete")
        internals.set_system_attr(study, frozen, "constraints", [1.5])
        stored = internals.stored_trial(study, frozen)
    assert stored.user_attrs == {"kind": "incomplete"}
    assert stored.system_attrs["constraints"] == [1.5]


def test_a_waiting_trial_is_closed(study: optuna.Study) -> None:
    study.enqueue_trial({"x": 0.5})
    (waiting,) = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    with _adapter("set_state"):
        internals.set_state(study, waiting, FAIL)
    assert study.get_trials()[0].state == FAIL


def test_a_new_running_trial_from_a_finished_one(study: optuna.Study) -> None:
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    study.tell(trial, state=FAIL)
    closed = study.get_trials()[0]
    template = optuna.trial.create_trial(
        state=optuna.trial.TrialState.RUNNING,
        params=closed.params,
        distributions=closed.distributions,
        user_attrs={"resumes_trial": closed.number},
    )
    with _adapter("new_running_trial"):
        again = internals.new_running_trial(study, template)
    study.tell(again, [0.5])
    assert [t.state.name for t in study.get_trials()] == ["FAIL", "COMPLETE"]
    assert study.get_trials()[1].params == closed.params
