"""tuner.experiment reads a real experiment folder made by ``tuner search`` (tests/conftest)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tuner.answer import decide
from tuner.engine.result import bound_of
from tuner.errors import TunerError
from tuner.experiment import (
    CUT_FILE,
    CUT_STARTED_UNIX_S,
    CUT_UNIX_S,
    LEADING_COLUMNS,
    load_experiment,
    resolve_experiment,
    speed_settings_of,
)
from tuner.techniques import accuracy_neutral_fields

LEADING = list(LEADING_COLUMNS)


def load_trials(path: Path) -> pd.DataFrame:
    return load_experiment(path).trials


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
        # The input pipeline's figures, measured by every trial that trained: the verdict from
        # its data wait, and (a trial that ran to its end) its loader alone.
        assert row["bound"] == bound_of(row["data_wait_fraction"])
        if row["kind"] == "ok":
            assert row["loader_images_per_second"] == pytest.approx(
                last["loader_images_per_second"]
            )
            assert row["loader_images_per_second"] > row["images_per_second"]  # digits: in memory


def test_param_columns_come_from_the_study(smoke_experiment: Path) -> None:
    experiment = load_experiment(smoke_experiment)
    assert {"norm", "batch_size", "base_lr"} <= set(experiment.searched_names)
    assert "lr" in experiment.param_names  # derived by the space, shown next to base_lr
    assert "model" not in experiment.param_names  # fixed workload
    # Speed knobs the probes chose are in the run config, not parameters: speed_settings.
    assert not set(experiment.param_names) & set(accuracy_neutral_fields())
    for trial_id, config in experiment.configs.items():
        row = experiment.trials.set_index("trial_id").loc[trial_id]
        assert row["param_batch_size"] == config["batch_size"]
        assert speed_settings_of(row["speed_settings"]).items() <= config.items()


def test_partial_experiment_has_an_incomplete_row(partial_experiment: Path) -> None:
    trials = load_trials(partial_experiment)
    incomplete = trials[trials["kind"] == "incomplete"]
    assert len(incomplete) == 1 and not incomplete["feasible"].any()
    assert incomplete["status"].isna().all() and (incomplete["reports"] == 0).all()


@pytest.mark.parametrize("name", ["missing", "not-an-experiment"])
def test_bad_folder_is_one_clear_error(tmp_path: Path, name: str) -> None:
    (tmp_path / "not-an-experiment").mkdir()
    with pytest.raises(TunerError, match="experiment") as info:
        resolve_experiment(name, storage=tmp_path)
    assert "\n" not in str(info.value)


def test_a_file_is_not_an_experiment_folder(tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text("# not an experiment")
    with pytest.raises(TunerError, match="is a file, not an experiment folder"):
        resolve_experiment(tmp_path / "report.md")


def test_corrupt_metadata_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "tuner_experiment.json").write_text("{not json")
    with pytest.raises(TunerError, match="not valid JSON"):
        load_experiment(tmp_path)


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("remeasure", "x", "'remeasure' is a string, the search writes a JSON object;"),
        (
            "search_only_params",
            3,
            "'search_only_params' is a number, the search writes a JSON list;",
        ),
        ("cluster", [1], "'cluster' is a JSON list, the search writes a JSON object;"),
        ("objective", 5, "'objective' is a number, the search writes a string;"),
        ("seed", "0", "'seed' is a string, the search writes a number or null;"),
    ],
)
def test_metadata_with_a_value_of_the_wrong_kind_is_one_clear_error(
    key: str, value: object, said: str, tmp_path: Path
) -> None:
    """Refused as it is read, in one line, not where a reader indexes it (a traceback)."""
    (tmp_path / "tuner_experiment.json").write_text(json.dumps({"name": "edited", key: value}))
    with pytest.raises(TunerError) as info:
        load_experiment(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'tuner_experiment.json'}: {said} the experiment folder is corrupt, "
        "restore the file or re-run the search."
    )


def test_metadata_null_is_read_as_absent(tmp_path: Path) -> None:
    """The search writes null for what is off (``early_stopping`` under --no-early-stopping):
    the kind check refused its own experiment on --resume and report ('is null, the search
    writes a string')."""
    nulls = {"early_stopping": None, "remeasure": None, "objective": None, "seed": None}
    (tmp_path / "tuner_experiment.json").write_text(json.dumps({"name": "off", **nulls}))
    assert load_experiment(tmp_path).metadata["early_stopping"] is None


def test_an_experiment_without_trials_is_an_empty_table(tmp_path: Path) -> None:
    (tmp_path / "tuner_experiment.json").write_text(json.dumps({"name": "empty"}))
    trials = load_trials(tmp_path)
    assert trials.empty and list(trials.columns) == LEADING


def test_counts_text_flags_and_times_have_their_dtypes(smoke_experiment: Path) -> None:
    trials = load_trials(smoke_experiment)
    for column in ("steps", "peak_memory_bytes", "num_parameters", "images_seen", "reports"):
        assert trials[column].dtype == "Int64", column
    for column in ("error", "infeasible_reason", "notes", "status", "trial_id", "kind"):
        assert trials[column].dtype == "string", column
        assert not (trials[column] == "").any(), f"{column}: missing text must be missing"
    assert trials["error"].isna().all()  # no trial failed
    assert trials.loc[trials["feasible"], "infeasible_reason"].isna().all()
    assert trials["feasible"].dtype == trials["final"].dtype == "boolean"
    assert trials["feasible"].notna().all()  # every trial is feasible or not
    assert trials["param_batch_size"].dtype == "Int64"  # the TrainConfig field is an int
    assert trials["param_base_lr"].dtype == "float64"  # search-only: inferred from its values


def test_a_trials_wall_time_runs_from_its_start_to_its_last_report(
    smoke_experiment: Path,
) -> None:
    trials = load_trials(smoke_experiment)
    assert str(trials["started_at"].dtype) == str(trials["ended_at"].dtype) == "datetime64[ms, UTC]"
    for _, row in trials.iterrows():
        lines = (smoke_experiment / row["trial_dir"] / "result.json").read_text().splitlines()
        first, last = json.loads(lines[0]), json.loads(lines[-1])
        wall = last["reported_unix_s"] - first["trial_started_unix_s"]
        assert row["trial_time_s"] == pytest.approx(wall)
        assert row["trial_time_s"] >= row["engine_time_s"] - 1e-6  # the engine runs inside it
        assert row["started_at"].timestamp() == round(first["trial_started_unix_s"])
        assert abs(row["ended_at"].timestamp() - last["timestamp"]) <= 1  # Ray's, whole seconds
        span = (row["ended_at"] - row["started_at"]).total_seconds()
        assert abs(span - row["trial_time_s"]) <= 1  # the dates are rounded to the second


# ---- nothing lost, nothing guessed silently --------------------------------------------------


def _copy(experiment: Path, tmp_path: Path) -> Path:
    copy = tmp_path / experiment.name
    shutil.copytree(experiment, copy)
    return copy


def _result_lines(experiment: Path, trial_id: str) -> tuple[Path, list[str]]:
    (file,) = [f for f in experiment.glob("*/result.json") if f"_{trial_id}_" in f.parent.name]
    return file, file.read_text().splitlines()


def _first_trial(experiment: Path) -> tuple[str, Path, list[str]]:
    """The first trial's id, its result.json and that file's lines."""
    trial_id = load_trials(experiment)["trial_id"].iloc[0]
    return (trial_id, *_result_lines(experiment, trial_id))


def _front(experiment: Path) -> list[str]:
    return decide(load_experiment(experiment)).front["trial_id"].tolist()


def test_a_damaged_last_line_keeps_the_trial_with_its_final_values_and_a_warning(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    best = _front(copy)[0]
    file, lines = _result_lines(copy, best)
    file.write_text("\n".join([*lines[:-1], lines[-1][: len(lines[-1]) // 2]]) + "\n")

    experiment = load_experiment(copy)
    row = experiment.trials.set_index("trial_id").loc[best]
    last_valid = json.loads(lines[-2])  # the final evaluation: the same measurements
    assert row["kind"] == "ok" and row["feasible"]  # not "stopped early"
    assert row["images_per_second"] == pytest.approx(last_valid["images_per_second"])
    assert row["val_accuracy"] == pytest.approx(last_valid["val_accuracy"])
    where = f"{file.parent.name}/result.json line {len(lines)} is damaged"
    assert any(p.startswith(where) for p in experiment.problems)
    assert any(f"trial {best}: its final report is damaged" in p for p in experiment.problems)
    assert _front(copy) == _front(smoke_experiment)  # the recommendation did not change


@pytest.mark.parametrize("damage", ["empty", "unreadable"])
def test_an_empty_or_unreadable_result_file_falls_back_to_the_study_with_a_warning(
    smoke_experiment: Path, tmp_path: Path, damage: str
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    best = _front(copy)[0]
    file, lines = _result_lines(copy, best)
    if damage == "empty":
        file.write_text("")
    else:
        file.unlink()
        file.mkdir()  # reading it fails with an OSError, as an unreadable file does for root

    experiment = load_experiment(copy)
    row = experiment.trials.set_index("trial_id").loc[best]
    final = json.loads(lines[-1])
    assert row["kind"] == "ok" and row["feasible"]  # still a finished trial, not dropped
    assert row["images_per_second"] == pytest.approx(final["images_per_second"])
    assert any(f"trial {best}: its " in p and "study.db" in p for p in experiment.problems)
    assert _front(copy) == _front(smoke_experiment)  # the recommendation did not change


def test_without_the_study_a_damaged_trial_keeps_its_last_valid_report(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    (copy / "study.db").unlink()
    trial_id, file, lines = _first_trial(copy)
    file.write_text("\n".join([*lines[:-1], "{not json"]) + "\n")

    experiment = load_experiment(copy)
    row = experiment.trials.set_index("trial_id").loc[trial_id]
    assert row["reports"] == len(lines) - 1
    assert row["images_per_second"] == pytest.approx(json.loads(lines[-2])["images_per_second"])
    # Its end is lost with its final report: not stopped early, not ok, but incomplete.
    assert row["kind"] == "incomplete" and "damaged" in row["infeasible_reason"]
    assert experiment.problems == [
        f"{file.parent.name}/result.json line {len(lines)} is damaged "
        "(Expecting property name enclosed in double quotes at column 2); skipped."
    ]


def test_result_json_and_the_study_disagreeing_is_listed(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    trial_id, file, lines = _first_trial(copy)
    final = {**json.loads(lines[-1]), "val_accuracy": 0.123456}
    file.write_text("\n".join([*lines[:-1], json.dumps(final)]) + "\n")

    (problem,) = load_experiment(copy).problems
    assert problem.startswith(
        f"trial {trial_id}: result.json and study.db disagree on val_accuracy"
    )


def _ray_state_with(state_file: Path, status: str) -> str:
    """The experiment state file's text with every trial's Ray status replaced."""
    data = json.loads(state_file.read_text())
    for entry in data["trial_data"]:
        entry[0] = json.dumps({**json.loads(entry[0]), "status": status})
    return json.dumps(data)


@pytest.mark.parametrize("old_mtime", ["equal", "newer"])
def test_ray_state_comes_from_the_file_ray_resumes_from_not_the_newest_mtime(
    smoke_experiment: Path, tmp_path: Path, old_mtime: str
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    (latest,) = copy.glob("experiment_state-*.json")
    older = copy / "experiment_state-2000-01-01_00-00-00.json"  # as before a resume
    older.write_text(_ray_state_with(latest, "RUNNING"))
    stamp = latest.stat().st_mtime
    os.utime(latest, (stamp, stamp))
    os.utime(older, (stamp, stamp + (1 if old_mtime == "newer" else 0)))

    trials = load_trials(copy)
    assert set(trials["ray_status"]) == {"TERMINATED"}
    assert "incomplete" not in set(trials["kind"])
    assert _front(copy) == _front(smoke_experiment)


def test_a_trial_with_its_final_report_is_finished_whatever_ray_state_says(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    (latest,) = copy.glob("experiment_state-*.json")
    latest.write_text(_ray_state_with(latest, "RUNNING"))  # saved before the trials ended

    trials = load_trials(copy)
    assert set(trials["ray_status"]) == {"RUNNING"}
    final = trials["final"].fillna(False).astype(bool)
    assert final.any()
    assert set(trials.loc[final, "kind"]) == {"ok"}
    # One stopped early by the scheduler has no final report: Ray's word is all there is.
    assert set(trials.loc[~final, "kind"]) <= {"incomplete"}
    assert _front(copy) == _front(smoke_experiment)


def test_an_unreadable_ray_state_file_is_listed_and_an_older_one_used(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    (copy / "experiment_state-2999-01-01_00-00-00.json").write_text('{"trial_data": [')
    experiment = load_experiment(copy)
    assert set(experiment.trials["ray_status"]) == {"TERMINATED"}
    assert experiment.problems[0].startswith("experiment_state-2999-01-01_00-00-00.json could not")


def test_report_lists_what_it_could_not_read(
    smoke_experiment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuner.commands import main

    copy = _copy(smoke_experiment, tmp_path)
    _, file, lines = _first_trial(copy)
    file.write_text("\n".join([*lines[:-1], lines[-1][:10]]) + "\n")

    assert main(["report", str(copy), "--out", str(tmp_path / "report")]) == 0
    damaged = f"{file.parent.name}/result.json line {len(lines)} is damaged"
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"warning: could not read everything in {copy}:"
    assert any(line.strip().startswith(damaged) for line in err[1:])
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "Could not read everything" in markdown and damaged in markdown


def test_a_trial_marked_cut_by_the_search_end_is_incomplete_unless_it_ended(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    # Ray ends a trial the search's time budget cut TERMINATED, as a stopped one: the marker
    # tracking.SearchEndCut leaves in its folder is what says it did not end by itself.
    copy = _copy(smoke_experiment, tmp_path)
    # Whether early stopping ended a smoke trial before its end depends on its results, so one
    # trial is cut here: its last (final) report dropped, as if the search ended before it.
    trial_ids = load_experiment(copy).trials["trial_id"].astype(str)
    cut = next(t for t in trial_ids if len(_result_lines(copy, t)[1]) > 1)
    file, lines = _result_lines(copy, cut)
    file.write_text("\n".join(lines[:-1]) + "\n")
    before = load_experiment(copy).trials.set_index("trial_id")
    ended = {}
    for trial_id in before.index:
        file, lines = _result_lines(copy, str(trial_id))
        (file.parent / CUT_FILE).write_text("{}")
        ended[trial_id] = json.loads(lines[-1])["final"] is True
    after = load_experiment(copy).trials.set_index("trial_id")
    for trial_id, final in ended.items():
        expected = before.at[trial_id, "kind"] if final else "incomplete"
        assert after.at[trial_id, "kind"] == expected
    assert not all(ended.values()) and any(ended.values())  # the smoke search has both


def test_an_unknown_experiment_names_every_place_it_looked(tmp_path: Path) -> None:
    from tuner.experiment import resolve_experiment

    with pytest.raises(TunerError) as info:
        resolve_experiment("no_such_name", storage=tmp_path)
    assert str(info.value) == (
        f"No experiment 'no_such_name': neither no_such_name nor {tmp_path / 'no_such_name'} "
        "exists; give its path or its name under --storage."
    )
    with pytest.raises(TunerError) as info:  # one place looked at: no "neither"
        resolve_experiment(tmp_path / "gone", storage=tmp_path)
    gone = tmp_path / "gone"
    assert str(info.value).startswith(f"No experiment '{gone}': {gone} does not exist;")


def test_a_damaged_params_file_is_named_and_the_trial_still_read(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    trial_id, file, lines = _first_trial(copy)
    (file.parent / "params.json").write_bytes(b"\xff\xfe not utf-8")

    experiment = load_experiment(copy)
    assert f"{file.parent.name}/params.json is damaged (UnicodeDecodeError)." in experiment.problems
    row = experiment.trials.set_index("trial_id").loc[trial_id]
    assert row["images_per_second"] == pytest.approx(json.loads(lines[-1])["images_per_second"])


def test_a_study_file_that_is_no_database_is_read_without(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    (copy / "study.db").write_bytes(b"half a file, not SQLite")
    experiment = load_experiment(copy)
    assert experiment.study is None
    assert any(p.startswith("study.db could not be read (damaged") for p in experiment.problems)
    assert len(experiment.trials) == 3 and _front(copy) == _front(smoke_experiment)


def test_a_trial_cut_before_its_first_report_has_its_times(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    """Issue 39: a trial the search's time budget cut before its first report ran 95-190 s, yet
    its trial_time_s, start and end were empty: the cut marker holds when it ran."""
    copy = _copy(smoke_experiment, tmp_path)
    trial_id, file, _ = _first_trial(copy)
    file.unlink()  # no report: Ray writes result.json at the first
    stamps = {
        "trial_id": trial_id,
        CUT_STARTED_UNIX_S: 1_800_000_000.0,
        CUT_UNIX_S: 1_800_000_095.0,
    }
    (file.parent / CUT_FILE).write_text(json.dumps(stamps))
    row = load_experiment(copy).trials.set_index("trial_id").loc[trial_id]
    assert row["kind"] == "incomplete" and row["trial_time_s"] == pytest.approx(95.0)
    assert row["started_at"] == pd.Timestamp(1_800_000_000, unit="s", tz="UTC")


def test_every_trials_accuracy_curve_is_one_row_per_evaluation(smoke_experiment: Path) -> None:
    experiment = load_experiment(smoke_experiment)
    curves, trials = experiment.curves, experiment.trials
    assert list(curves.columns) == [
        "trial_id", "step", "images_seen", "train_time_s", "val_accuracy", "val_images"
    ]  # fmt: skip
    assert str(curves["step"].dtype) == "Int64" and str(curves["val_accuracy"].dtype) == "float64"
    assert set(curves["trial_id"]) == set(trials.loc[trials["val_accuracy"].notna(), "trial_id"])
    every = experiment.metadata["workload"]["eval_every_images"]  # smoke_space: 240 of 480
    for trial_id, curve in curves.groupby("trial_id"):
        row = trials.set_index("trial_id").loc[trial_id]
        lines = (smoke_experiment / row["trial_dir"] / "result.json").read_text().splitlines()
        evaluated = [r for r in map(json.loads, lines) if r["val_accuracy"] is not None]
        # One row per evaluated step (the final report repeats the last evaluation), in order.
        assert list(curve["step"]) == sorted({r["step"] for r in evaluated})
        assert curve["train_time_s"].is_monotonic_increasing
        batch = int(row["global_batch_size"])
        marks = [every * k for k in range(1, len(curve) + 1)]
        # The k-th evaluation comes after k x 240 images, within one batch, whatever the batch.
        for seen, mark in zip(curve["images_seen"], marks, strict=True):
            assert mark <= seen < mark + batch
        assert curve["val_accuracy"].iloc[-1] == pytest.approx(row["val_accuracy"])
        assert (curve["val_images"] > 0).all()


def test_a_retried_trials_repeated_reports_are_one_row_each(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = _copy(smoke_experiment, tmp_path)
    result = next(copy.glob("*/result.json"))
    lines = result.read_text().splitlines()
    result.write_text("\n".join([*lines, *lines]) + "\n")  # as a retry reports its steps again
    assert load_experiment(copy).curves.equals(load_experiment(smoke_experiment).curves)


_REMEASURE = "trial_id,repeat,status,images_per_second\na,0,ok,100.5\na,1,ok,101.5\n"


@pytest.mark.parametrize(
    ("file", "text", "said"),
    [
        (
            "effects.csv",
            b"\x8d\xff\x00 not text",
            "effects.csv could not be read (UnicodeDecodeError",
        ),
        ("remeasure.csv", b'a,"b\n1,2\n', "remeasure.csv could not be read (ParserError"),
        ("seeds.csv", b"a,b\n1,2\n", "seeds.csv lacks the column(s) trial_id, arm, status,"),
        (
            "remeasure.csv",
            _REMEASURE.replace("101.5", "fast").encode(),
            "remeasure.csv holds 'fast' in its column images_per_second, not a number;",
        ),
    ],
    ids=["binary", "unparsable", "other columns", "a word for a number"],
)
def test_a_damaged_table_is_listed_and_read_as_absent(
    file: str, text: bytes, said: str, tmp_path: Path
) -> None:
    """All or nothing: a table half read would be half the measurements, told as all."""
    (tmp_path / "tuner_experiment.json").write_text(json.dumps({"name": "damaged"}))
    (tmp_path / file).write_bytes(text)
    experiment = load_experiment(tmp_path)
    assert getattr(experiment, file.removesuffix(".csv")) is None
    assert [p for p in experiment.problems if p.startswith(said)], experiment.problems
    assert experiment.problems[0].endswith("the report goes without it (restore the file, or "
                                           "re-run the search).")  # fmt: skip


def test_a_table_cut_short_keeps_its_whole_rows(tmp_path: Path) -> None:
    """A driver stopped mid-write leaves half a row: its numbers are cut, so it goes, said."""
    (tmp_path / "tuner_experiment.json").write_text(json.dumps({"name": "cut"}))
    (tmp_path / "remeasure.csv").write_text(_REMEASURE[:-4])  # 101.5 cut to 10
    experiment = load_experiment(tmp_path)
    assert experiment.remeasure["images_per_second"].tolist() == [100.5]
    assert experiment.problems == [
        "remeasure.csv: its last line is cut short; that row is left out."
    ]


def test_a_params_file_that_is_no_object_is_named(tmp_path: Path) -> None:
    """Valid JSON but not an object: the trial's config is as unknown as for broken JSON."""
    from tuner.experiment._read import read_params

    (tmp_path / "t_1").mkdir()
    (tmp_path / "t_1" / "params.json").write_text("[1, 2]")
    problems: list[str] = []
    assert read_params(tmp_path / "t_1", problems) == {}
    assert problems == ["t_1/params.json is damaged (not a JSON object)."]


def test_a_word_in_result_json_where_a_number_belongs_takes_the_study_s_value() -> None:
    """An edited or damaged value: the study holds the trial's measurement, so it is not lost."""
    from tuner.experiment._load import _reconcile
    from tuner.experiment._read import Results

    last = {"status": "ok", "images_per_second": "fast", "val_accuracy": 0.5}
    told = {"status": "ok", "images_per_second": 137.5, "val_accuracy": 0.25}
    problems: list[str] = []
    result, lost = _reconcile("t1", Results(last, last, 1, lost_tail=False), told, problems)
    assert not lost and result["images_per_second"] == 137.5 and result["val_accuracy"] == 0.5
    assert problems == [
        "trial t1: result.json holds 'fast' for images_per_second, not a number; the report "
        "uses study.db's 137.5.",
        "trial t1: result.json and study.db disagree on val_accuracy (0.5 vs 0.25); the report "
        "uses result.json.",
    ]
