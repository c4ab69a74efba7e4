"""The Optuna side without a cluster: a real study, the real searcher, real samplers."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tuner.errors import TunerError
from tuner.search.metrics import OBJECTIVE_KEYS, objective_metrics
from tuner.search.samplers import make_sampler
from tuner.search.searcher import ConstrainedOptunaSearch
from tuner.spaces import SpaceSampler

THROUGHPUT, ACCURACY = OBJECTIVE_KEYS["throughput"], OBJECTIVE_KEYS["accuracy"]


def _searcher(tmp_path: Path, sampler: str = "tpe") -> ConstrainedOptunaSearch:
    return ConstrainedOptunaSearch(
        space=SpaceSampler("smoke_space", False),
        metric=objective_metrics("pareto"),
        mode=["max", "max"],
        sampler=make_sampler(sampler, seed=0, budget=8, concurrency=1, grid=None),
        study_name="unit",
        storage=optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'study.db'}"),
    )


def _result(*, violation: float, feasible: bool) -> dict:
    return {
        THROUGHPUT: 100.0 if feasible else 0.0,
        ACCURACY: 0.5 if feasible else 0.0,
        "memory_violation": violation,
        "feasible": feasible,
        "peak_memory_bytes": 123.0,
        "status": "ok",
    }


def test_infeasible_trial_reaches_optuna_complete_with_its_violation(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path)
    config = searcher.suggest("ray-a")
    assert config is not None and "batch_size" in config and "lr" in config
    searcher.on_trial_complete("ray-a", result=_result(violation=0.7, feasible=False))
    (trial,) = optuna.load_study(
        study_name="unit", storage=f"sqlite:///{tmp_path / 'study.db'}"
    ).trials
    assert trial.state == optuna.trial.TrialState.COMPLETE
    assert trial.values == [0.0, 0.0]
    assert trial.user_attrs["ray_trial_id"] == "ray-a"
    assert trial.user_attrs["memory_violation"] == 0.7 and trial.user_attrs["feasible"] is False
    if hasattr(trial, "constraints"):  # Optuna >= 5 reads constraints from the trial
        assert list(trial.constraints.values()) == [0.7]


def test_errored_trial_is_failed_even_after_reporting_objectives(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path)
    searcher.suggest("ray-b")
    searcher.on_trial_complete("ray-b", result=_result(violation=-1, feasible=True), error=True)
    (trial,) = searcher._ot_study.trials
    assert trial.state == optuna.trial.TrialState.FAIL


def test_pareto_front_holds_only_feasible_trials(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path, sampler="nsga2")
    for i, (violation, feasible) in enumerate([(-0.5, True), (0.3, False), (-0.1, True)]):
        searcher.suggest(f"ray-{i}")
        searcher.on_trial_complete(
            f"ray-{i}", result=_result(violation=violation, feasible=feasible)
        )
    front = searcher._ot_study.best_trials
    assert front and all(t.user_attrs["feasible"] for t in front)


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
