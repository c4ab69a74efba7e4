"""tuner.results on a real experiment folder made by ``tuner search`` (tests/report/conftest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.errors import TunerError
from tuner.results import TRIAL_COLUMNS, load_experiment, load_trials, resolve_experiment

# The documented columns that lead the table (effective_<field> names a family of columns).
LEADING = [column for column in TRIAL_COLUMNS if "<" not in column]


def test_one_row_per_trial_with_documented_columns(smoke_experiment: Path) -> None:
    trials = load_trials(smoke_experiment)
    assert list(trials.columns[: len(LEADING)]) == LEADING
    assert any(column.startswith("effective_") for column in trials.columns)
    assert len(trials) == 3 and trials["trial_id"].is_unique
    for _, row in trials.iterrows():
        lines = (smoke_experiment / row["trial_dir"] / "result.json").read_text().splitlines()
        last = json.loads(lines[-1])  # the final report is the trial's result
        assert row["images_per_second"] == pytest.approx(last["images_per_second"])
        assert row["status"] == last["status"]
        assert row["reports"] == len(lines)


def test_param_columns_come_from_the_study(smoke_experiment: Path) -> None:
    experiment = load_experiment(smoke_experiment)
    assert {"norm", "batch_size", "base_lr"} <= set(experiment.searched_names)
    assert "lr" in experiment.param_names  # derived by the space, shown next to base_lr
    assert "model" not in experiment.param_names  # fixed workload
    for trial_id, config in experiment.configs.items():
        row = experiment.trials.set_index("trial_id").loc[trial_id]
        assert row["param_batch_size"] == config["batch_size"]


def test_partial_experiment_has_an_incomplete_row(partial_experiment: Path) -> None:
    trials = load_trials(partial_experiment)
    incomplete = trials[trials["status"] == "incomplete"]
    assert len(incomplete) == 1 and not incomplete["feasible"].any()
    assert incomplete["infeasible_reason"].str.contains("no final result").all()


@pytest.mark.parametrize("name", ["missing", "not-an-experiment"])
def test_bad_folder_is_one_clear_error(tmp_path: Path, name: str) -> None:
    (tmp_path / "not-an-experiment").mkdir()
    with pytest.raises(TunerError, match="experiment") as info:
        resolve_experiment(name, storage=tmp_path)
    assert "\n" not in str(info.value)


def test_corrupt_metadata_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "tuner_experiment.json").write_text("{not json")
    with pytest.raises(TunerError, match="not valid JSON"):
        load_experiment(tmp_path)


def test_an_experiment_without_trials_is_an_empty_table(tmp_path: Path) -> None:
    (tmp_path / "tuner_experiment.json").write_text(json.dumps({"name": "empty"}))
    trials = load_trials(tmp_path)
    assert trials.empty and list(trials.columns) == LEADING


def test_counts_text_flags_and_times_have_their_dtypes(smoke_experiment: Path) -> None:
    trials = load_trials(smoke_experiment)
    for column in ("steps", "peak_memory_bytes", "num_parameters", "images_seen", "reports"):
        assert trials[column].dtype == "Int64", column
    for column in ("error", "infeasible_reason", "notes", "status", "trial_id"):
        assert trials[column].dtype == "string", column
        assert not (trials[column] == "").any(), f"{column}: missing text must be missing"
    assert trials["error"].isna().all()  # no trial failed
    assert trials.loc[trials["feasible"], "infeasible_reason"].isna().all()
    assert trials["feasible"].dtype == bool and trials["final"].dtype == "boolean"
    assert trials["param_batch_size"].dtype == "Int64"  # the TrainConfig field is an int
    assert trials["param_base_lr"].dtype == "float64"  # search-only: inferred from its values


def test_started_and_ended_at_come_from_rays_report_times(smoke_experiment: Path) -> None:
    trials = load_trials(smoke_experiment)
    assert str(trials["started_at"].dtype) == str(trials["ended_at"].dtype) == "datetime64[ms, UTC]"
    for _, row in trials.iterrows():
        lines = (smoke_experiment / row["trial_dir"] / "result.json").read_text().splitlines()
        first, last = json.loads(lines[0]), json.loads(lines[-1])
        assert row["ended_at"].timestamp() == last["timestamp"]
        assert row["started_at"].timestamp() == round(first["timestamp"] - first["time_total_s"])
        assert row["started_at"] <= row["ended_at"]
