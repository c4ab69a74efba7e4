"""Every private Optuna use (tuner/tune/_optuna_internals.py) against the installed Optuna, on a
real SQLite study, and the members of the installed Ray's ``OptunaSearch`` it reads: an upgrade
that breaks one fails here, naming the version."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import ray
from adapters import adapter_guard
from ray import tune
from ray.tune.search.optuna import OptunaSearch

from tuner.tune import _optuna_internals as internals
from tuner.tune.searcher import ConstrainedOptunaSearch

FAIL = optuna.trial.TrialState.FAIL


_adapter = adapter_guard("Optuna", optuna.__version__, "_optuna_internals.py")
_search = adapter_guard("Ray", ray.__version__, "_optuna_internals.py")


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


def _searcher() -> ConstrainedOptunaSearch:
    return ConstrainedOptunaSearch(
        space={"x": tune.uniform(0, 1)}, metric=["a", "b"], mode=["max", "max"],
        study_attrs={"space": "s"},
    )  # fmt: skip


def test_the_study_and_trials_of_ray_s_optuna_search(tmp_path: Path) -> None:
    with _search("search_study, after the _setup_study ConstrainedOptunaSearch extends"):
        search = _searcher()
        study = internals.search_study(search)
        assert isinstance(search, OptunaSearch) and isinstance(study, optuna.Study)
        assert study.metric_names == ["a", "b"] and study.user_attrs == {"space": "s"}
    with _search("search_trials: every trial asked, a restored search's too"):
        search.suggest("t1"), search.suggest("t2")
        trials = internals.search_trials(search)
        assert {ray_id: trial.number for ray_id, trial in trials.items()} == {"t1": 0, "t2": 1}
        search.save(str(tmp_path / "searcher.pkl"))
        restored = _searcher()
        restored.restore(str(tmp_path / "searcher.pkl"))
        assert sorted(internals.search_trials(restored)) == ["t1", "t2"]
    with _search("search_told"):
        assert internals.search_told(search) == set()
        OptunaSearch.on_trial_complete(search, "t1", {"a": 0.5, "b": 0.5})  # Ray's own tell
        assert internals.search_told(search) == {"t1"}
    with _search("search_trials: a trial set in it is the one told"):
        asked = trials["t2"]
        template = optuna.trial.create_trial(
            state=optuna.trial.TrialState.RUNNING,
            params=asked.params,
            distributions=asked.distributions,
        )
        trials["t2"] = internals.new_running_trial(study, template)
        OptunaSearch.on_trial_complete(search, "t2", {"a": 0.1, "b": 0.2})
    assert [t.state.name for t in study.get_trials()] == ["COMPLETE", "RUNNING", "COMPLETE"]
    assert study.get_trials()[2].values == [0.1, 0.2]
