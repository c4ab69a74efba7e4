"""The Optuna side without a cluster: a real study, the real searcher, real samplers."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tuner.errors import TunerError
from tuner.objectives import objective_metrics
from tuner.record import KIND, classify, optuna_state
from tuner.spaces import SpaceSampler
from tuner.tune._optuna_internals import search_study
from tuner.tune.samplers import make_sampler
from tuner.tune.searcher import ConstrainedOptunaSearch

THROUGHPUT, ACCURACY = objective_metrics("pareto")


def _searcher(tmp_path: Path, sampler: str = "tpe") -> ConstrainedOptunaSearch:
    return ConstrainedOptunaSearch(
        study_attrs={"space": "smoke_space", "hardware": {"host": "h"}},
        space=SpaceSampler("smoke_space", False),
        metric=objective_metrics("pareto"),
        mode=["max", "max"],
        sampler=make_sampler(sampler, seed=0, budget=8, concurrency=1, grid=None),
        study_name="unit",
        storage=optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'study.db'}"),
    )


def _result(*, violation: float, feasible: bool, ips: float = 100.0, acc: float = 0.5) -> dict:
    return {
        THROUGHPUT: ips,
        ACCURACY: acc,
        "memory_violation": violation,
        "feasible": feasible,
        "peak_memory_bytes": 123.0,
        "status": "ok",
        "final": True,
    }


def _stored(tmp_path: Path) -> optuna.Study:
    return optuna.load_study(study_name="unit", storage=f"sqlite:///{tmp_path / 'study.db'}")


def test_an_over_budget_trial_is_pruned_with_its_measurements_and_its_violation(
    tmp_path: Path,
) -> None:
    searcher = _searcher(tmp_path)
    config = searcher.suggest("ray-a")
    assert config is not None and "batch_size" in config and "lr" in config
    searcher.on_trial_complete("ray-a", result=_result(violation=0.7, feasible=False, ips=900.0))
    study = _stored(tmp_path)
    (trial,) = study.trials
    # Not COMPLETE: no objective value it did not measure to its end, on no front.
    assert trial.state == optuna.trial.TrialState.PRUNED and trial.values is None
    assert trial.user_attrs[THROUGHPUT] == 900.0  # what it measured, as it measured it
    assert trial.user_attrs["ray_trial_id"] == "ray-a"
    assert trial.user_attrs["memory_violation"] == 0.7 and trial.user_attrs["feasible"] is False
    assert trial.system_attrs["constraints"] == [0.7]  # where optuna-dashboard reads it
    assert all(v == 0.7 for v in trial.constraints.values())  # where Optuna 5 reads it
    assert study.metric_names == [THROUGHPUT, ACCURACY]
    assert study.user_attrs["space"] == "smoke_space"
    assert study.best_trials == []  # the only trial is infeasible


def test_an_oom_before_any_measurement_is_pruned_and_infeasible(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path)
    searcher.suggest("ray-o")
    oom = {"status": "oom", THROUGHPUT: float("nan"), ACCURACY: float("nan"),
           "memory_violation": 1.0, "feasible": False}  # fmt: skip
    searcher.on_trial_complete("ray-o", result=oom)
    (trial,) = _stored(tmp_path).trials
    assert trial.state == optuna.trial.TrialState.PRUNED and trial.values is None
    assert trial.system_attrs["constraints"] == [1.0]


_NAN = float("nan")


@pytest.mark.parametrize(
    ("result", "error", "kind"),
    [
        ({"status": "ok", "final": True, "memory_violation": -0.5}, False, "ok"),
        ({"status": "ok", "final": False, "memory_violation": -0.5}, False, "stopped early"),
        ({"status": "ok", "final": True, "memory_violation": 0.7}, False, "over budget"),
        # A diverged run measured a finite accuracy before its loss blew up: still a failure.
        ({"status": "diverged", "final": True, "error": "loss is nan"}, False, "diverged"),
        ({"status": "error", "error": "num_classes=5", ACCURACY: _NAN}, False, "errored"),
        ({"status": "ok", "final": True, "memory_violation": -0.5}, True, "errored"),
    ],
)
def test_each_kind_is_told_in_the_state_the_record_gives_it(
    tmp_path: Path, result: dict, error: bool, kind: str
) -> None:
    searcher = _searcher(tmp_path)
    searcher.suggest("ray-k")
    told = {**_result(violation=-1, feasible=True), **result}
    searcher.on_trial_complete("ray-k", result=told, error=error)
    (trial,) = _stored(tmp_path).trials
    assert trial.user_attrs[KIND] == kind == classify(trial.user_attrs, ended=True, crashed=error)
    assert trial.state == optuna.trial.TrialState[optuna_state(kind)]
    if kind in ("diverged", "errored") and "error" in result:
        assert trial.user_attrs["error"] == result["error"]


def test_an_errored_trial_ray_ends_without_a_result_keeps_its_last_report(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path)
    searcher.suggest("ray-e")
    last = {"status": "error", "error": "bad input", "final": True, THROUGHPUT: _NAN}
    searcher.on_trial_result("ray-e", last)
    searcher.on_trial_complete("ray-e", error=True)  # what Ray's controller calls on an ERROR
    (trial,) = _stored(tmp_path).trials
    assert trial.state == optuna.trial.TrialState.FAIL
    assert trial.user_attrs[KIND] == "errored" and trial.user_attrs["error"] == "bad input"


def test_a_trial_that_crashed_before_any_report_is_errored_with_a_reason(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path)
    searcher.suggest("ray-x")
    searcher.on_trial_complete("ray-x", error=True)
    (trial,) = _stored(tmp_path).trials
    assert trial.state == optuna.trial.TrialState.FAIL and trial.user_attrs[KIND] == "errored"
    assert "error.txt" in trial.user_attrs["error"]


def test_pareto_front_holds_only_feasible_trials(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path, sampler="nsga2")
    for i, (violation, feasible) in enumerate([(-0.5, True), (0.3, False), (-0.1, True)]):
        searcher.suggest(f"ray-{i}")
        searcher.on_trial_complete(
            f"ray-{i}", result=_result(violation=violation, feasible=feasible)
        )
    study = search_study(searcher)
    front = study.best_trials
    assert front and all(t.user_attrs["feasible"] for t in front)
    # optuna-dashboard's front ignores constraints: computed so, it holds no infeasible trial.
    from optuna.study._multi_objective import _get_pareto_front_trials_by_trials

    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    unconstrained = _get_pareto_front_trials_by_trials(complete, study.directions)
    assert unconstrained and all(t.user_attrs["feasible"] for t in unconstrained)


@pytest.mark.parametrize("name", ["tpe", "gp", "nsga2", "random"])
def test_every_sampler_drives_a_seeded_search(name: str) -> None:
    def draws() -> list[dict]:
        study = optuna.create_study(
            directions=["maximize", "maximize"],
            sampler=make_sampler(name, seed=3, budget=6, concurrency=1, grid=None),
        )
        sample = SpaceSampler("smoke_space", False)
        for _ in range(4):
            trial = study.ask()
            sample(trial)
            study.tell(trial, [trial.params["batch_size"], 0.5])
        return [t.params for t in study.trials]

    assert draws() == draws()  # the same seed samples the same trials


def test_grid_sampler_needs_a_grid() -> None:
    with pytest.raises(TunerError, match="needs a space that declares GRID"):
        make_sampler("grid", seed=0, budget=None, concurrency=1, grid=None)
    grid = {"batch_size": [16, 32, 64], "base_lr": [3e-4, 1e-3, 3e-3], "norm": ["batch", "group"]}
    study = optuna.create_study(sampler=make_sampler("grid", seed=0, budget=None, concurrency=1,
                                                     grid=grid))  # fmt: skip
    sample = SpaceSampler("tiny_grid_space", False)
    study.optimize(lambda trial: sample(trial)["lr"], n_trials=30)  # the grid stops it at 18
    seen = {(t.params["batch_size"], t.params["base_lr"], t.params["norm"]) for t in study.trials}
    assert len(seen) == 18  # the whole grid, each point once


def test_trials_the_search_end_cut_and_unasked_design_trials_are_closed(tmp_path: Path) -> None:
    # The fast sibling of tests/tune/test_clients.py's incomplete trial: the same closing,
    # on a real study with a RUNNING trial Ray cut and a WAITING one no Ray trial asked.
    from tuner.tune.searcher import close_orphans

    searcher = _searcher(tmp_path)
    searcher.suggest("ray-cut")
    search_study(searcher).enqueue_trial({"lr": 0.01})
    cut = {"ray-cut": {"status": "ok", "final": False, THROUGHPUT: 50.0, "step": 6}}
    url = f"sqlite:///{tmp_path / 'study.db'}"
    assert close_orphans("unit", url, {"ray-cut"}, cut) == []  # no orphan: Ray ran it
    cut_trial, waiting = sorted(_stored(tmp_path).trials, key=lambda t: t.number)
    assert cut_trial.state == optuna.trial.TrialState.FAIL
    assert cut_trial.user_attrs[KIND] == "incomplete" and cut_trial.user_attrs[THROUGHPUT] == 50.0
    assert (
        waiting.state == optuna.trial.TrialState.FAIL
        # whatever ended the search (a time budget, Ctrl-C): the reason names none
        and waiting.user_attrs["not_run"] == "the search ended before this trial started"
    )
