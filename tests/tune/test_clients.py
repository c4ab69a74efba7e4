"""One trial is told the same to every client (issues 18, 28): one real search, every client read
back.

The session's ``every_kind_experiment`` (tests/conftest.py): one search of
``spaces/clients_space.py`` through the CLI, seven trials in a fixed order, one of each kind
(ok, stopped early by ParetoASHA, over the memory budget, diverged, errored as bad input,
errored inside the engine, and incomplete: cut by ``--search-time-budget-s``), tracked with
MLflow (a real SQLite store) and W&B (offline, no account, no network). Each trial's kind is
then read from every client with the client's own reader and must be the same everywhere: the
experiment's trials table, the Optuna study (and its front computed without constraints, as
optuna-dashboard computes it), Ray's ``ExperimentAnalysis`` and ``ResultGrid``, TensorBoard's
event files (the kind text, the scalars, the HParams status), the MLflow runs, the W&B offline
files and the console's per-trial lines.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from tiers import EARLY_BUILD_WAIT_S

from tuner.experiment import CUT_FILE, load_experiment, read_trials_csv, write_trials_csv
from tuner.record import ERROR, KIND, KINDS, STEP, classify, optuna_state

# The module's tests wait for the session's every-kind search (tests/conftest.py).
pytestmark = [pytest.mark.timeout(EARLY_BUILD_WAIT_S), pytest.mark.slow]  # tests/tiers.py: FAST_CPU

EXPECTED = {"ok": "ok", "weak": "stopped early", "over": "over budget", "blowup": "diverged",
            "bad": "errored", "crash": "errored", "cut": "incomplete"}  # fmt: skip
_LINE = re.compile(rf"^\[\s*\d+/\S+\s+\d+s(?:, eta \w+)?\] ({'|'.join(KINDS)})\s+(\w+)  ")


@pytest.fixture(scope="module")
def search(
    every_kind_experiment: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The session's search of every kind (tests/conftest.py, read-only), its kinds cached
    per module and a ``scratch`` folder of this module's own to write into."""
    return {**every_kind_experiment, "scratch": tmp_path_factory.mktemp("clients")}


def _trial_dirs(experiment: Path) -> list[Path]:
    return sorted(p.parent for p in experiment.glob("*/result.json"))


def _table_kinds(search: dict[str, Any]) -> dict[str, str]:
    """Each trial's kind in the experiment's trials.csv (written and read back as the report
    does): what every other client must say."""
    csv = search["scratch"] / "trials.csv"
    write_trials_csv(load_experiment(search["experiment"]).trials, csv)
    trials = read_trials_csv(csv).set_index("trial_id")
    return trials[KIND].to_dict()


def _expected(search: dict[str, Any]) -> dict[str, str]:
    if "kinds" not in search:
        search["kinds"] = _table_kinds(search)
    return search["kinds"]


def test_the_console_names_each_kind_in_the_records_words(search: dict[str, Any]) -> None:
    lines = [_LINE.match(line) for line in search["stdout"].splitlines()]
    kinds = {m.group(2): m.group(1) for m in lines if m}
    assert kinds == _expected(search)
    starts = [line for line in search["stdout"].splitlines() if "] start  " in line]
    assert len(starts) == len(EXPECTED)  # Ray's retry of the errored trial is no new start
    wandb_lines = [line for line in (search["stdout"] + search["stderr"]).splitlines()
                   if line.lower().startswith("wandb")]  # fmt: skip
    assert wandb_lines == []
    # The summary at the end counts the same kinds, each once, in the record's order.
    counts = {kind: list(_expected(search).values()).count(kind) for kind in KINDS}
    words = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    assert f"Search finished: {len(EXPECTED)} trials ({words})" in search["stdout"]


def test_the_trials_table_tells_the_kind_each_trial_was_made_to_be(search: dict[str, Any]) -> None:
    by_variant = {search["variants"][tid]: kind for tid, kind in _expected(search).items()}
    assert by_variant == EXPECTED
    # The console names why the cut trial stopped, never the memory budget it kept to.
    (cut,) = [tid for tid, variant in search["variants"].items() if variant == "cut"]
    (line,) = [line for line in search["stdout"].splitlines() if f"] incomplete    {cut}" in line]
    assert "the search ended before it did" in line and "budget" not in line
    # It was cut before its first report (its evaluation is a million steps away): the case
    # every client must still end with its kind and its times (issue 39).
    (folder,) = [d for d in search["experiment"].glob(f"*_{cut}_*") if d.is_dir()]
    assert not (folder / "result.json").read_text().strip()


def test_a_trials_wall_time_is_its_started_to_ended_span(search: dict[str, Any]) -> None:
    trials = load_experiment(search["experiment"]).trials
    for _, row in trials.iterrows():
        span = (row["ended_at"] - row["started_at"]).total_seconds()
        assert abs(row["trial_time_s"] - span) <= 1, row["trial_id"]  # dates: whole seconds
        if search["variants"][row["trial_id"]] == "cut":  # never reported: no engine time
            assert row["trial_time_s"] > 0 and math.isnan(row["engine_time_s"])
        else:
            assert row["trial_time_s"] >= row["engine_time_s"] - 1e-6  # the engine runs in it


def _study(search: dict[str, Any]) -> optuna.Study:
    storage = f"sqlite:///{search['experiment'] / 'study.db'}"
    return optuna.load_study(study_name=search["name"], storage=storage)


def test_the_optuna_study_tells_each_kind_its_state_and_only_measured_values(
    search: dict[str, Any],
) -> None:
    study = _study(search)
    assert {t.state for t in study.trials} <= {
        optuna.trial.TrialState[optuna_state(kind)] for kind in KINDS
    }  # nothing RUNNING forever, no WAITING trial of the design left behind
    by_ray_id = {
        t.user_attrs["ray_trial_id"]: t for t in study.trials if "ray_trial_id" in t.user_attrs
    }
    assert {tid: t.user_attrs[KIND] for tid, t in by_ray_id.items()} == _expected(search)
    table = load_experiment(search["experiment"]).trials.set_index("trial_id")
    for tid, trial in by_ray_id.items():
        kind = trial.user_attrs[KIND]
        assert trial.state == optuna.trial.TrialState[optuna_state(kind)]
        if kind in ("errored", "diverged"):
            assert trial.user_attrs[ERROR]  # why it failed, where optuna-dashboard shows it
        if trial.state == optuna.trial.TrialState.COMPLETE:  # values it measured to its end
            measured = [table.at[tid, name] for name in study.metric_names]
            assert trial.values == pytest.approx(measured)
        else:
            assert trial.values is None
        if kind == "over budget":  # infeasible where Optuna's samplers read it
            assert all(v > 0 for v in trial.constraints.values()) and trial.constraints


def test_a_front_computed_without_constraints_holds_no_trial_that_cannot_be_picked(
    search: dict[str, Any],
) -> None:
    from optuna.study._multi_objective import _get_pareto_front_trials_by_trials

    study = _study(search)
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    front = _get_pareto_front_trials_by_trials(complete, study.directions)  # as the dashboard
    assert front and {t.user_attrs[KIND] for t in front} == {"ok"}


def _ray_statuses(search: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    from ray.tune import ExperimentAnalysis

    analysis = ExperimentAnalysis(str(search["experiment"]))
    return analysis, {trial.trial_id: trial.status for trial in analysis.trials}


def test_ray_ends_each_errored_trial_as_an_error_without_training_it_again(
    search: dict[str, Any],
) -> None:
    from ray.tune import ResultGrid

    analysis, statuses = _ray_statuses(search)
    errored = {tid for tid, kind in _expected(search).items() if kind == "errored"}
    assert {tid for tid, s in statuses.items() if s == "ERROR"} == errored
    grid = ResultGrid(analysis)
    messages = sorted(str(error) for error in grid.errors)
    assert len(messages) == 2  # bad input, and the engine's own error (a stem of 1 channel)
    assert any("num_classes=5" in m for m in messages) and any("channels" in m for m in messages)
    frame = analysis.dataframe().set_index("trial_id")
    for tid, status in statuses.items():  # Ray's words agree with the record's
        if (search["experiment"] / _dir_of(search, tid) / CUT_FILE).exists():
            assert status == "TERMINATED"  # Ray cannot tell a cut trial: the marker does
            continue
        kind = classify(frame.loc[tid].to_dict(), ended=True, crashed=status == "ERROR")
        assert kind == _expected(search)[tid]
    for tid in errored:  # tried 1 + max_failures times, trained once: one report
        trial_dir = search["experiment"] / _dir_of(search, tid)
        failures = (trial_dir / "error.txt").read_text().count("Failure #")
        assert failures == 1 + search["max_failures"]
        assert len((trial_dir / "result.json").read_text().splitlines()) == 1


def _dir_of(search: dict[str, Any], trial_id: str) -> str:
    (found,) = [p.name for p in search["experiment"].glob(f"t_{trial_id}_*") if p.is_dir()]
    return found


_HPARAMS_STATUS = {"ok": "STATUS_SUCCESS", "stopped early": "STATUS_SUCCESS",
                   "over budget": "STATUS_SUCCESS", "diverged": "STATUS_FAILURE",
                   "errored": "STATUS_FAILURE", "incomplete": "STATUS_UNKNOWN"}  # fmt: skip


def test_tensorboard_tells_each_kind_at_the_last_step_and_in_the_hparams_status(
    search: dict[str, Any],
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    kinds, statuses = {}, {}
    for trial_dir in _trial_dirs(search["experiment"]):
        events = EventAccumulator(str(trial_dir), size_guidance={"tensors": 0})
        events.Reload()
        (text,) = events.Tensors(f"ray/tune/{KIND}/text_summary")  # tensorboardX names it
        trial_id = trial_dir.name.split("_")[1]
        kinds[trial_id] = text.tensor_proto.string_val[0].decode()
        scalars = events.Tags()["scalars"]
        steps = [p.step for p in events.Scalars(f"ray/tune/{STEP}")] if scalars else []
        assert steps == sorted(set(steps))  # each step once
        if steps:
            assert text.step == steps[-1]
        else:  # only the trial cut before its first report has no step
            assert search["variants"][trial_dir.name.split("_")[1]] == "cut"
        content = events.PluginTagToContent("hparams")["_hparams_/session_end_info"]
        end = plugin_data_pb2.HParamsPluginData.FromString(content).session_end_info
        statuses[trial_id] = api_pb2.Status.Name(end.status)
    assert kinds == _expected(search)
    assert statuses == {tid: _HPARAMS_STATUS[kind] for tid, kind in kinds.items()}


def test_mlflow_tells_each_kind_as_a_tag_and_a_status(search: dict[str, Any]) -> None:
    import mlflow

    client = mlflow.MlflowClient(search["uri"])
    (experiment,) = [e for e in client.search_experiments() if e.name == search["name"]]
    runs = client.search_runs([experiment.experiment_id])
    trials = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    kinds = {r.data.tags["trial_name"].rsplit("_", 1)[-1]: r.data.tags[KIND] for r in trials}
    assert kinds == _expected(search)
    for run in trials:
        kind = run.data.tags[KIND]
        failed = optuna_state(kind) == "FAIL"
        status = "KILLED" if kind == "incomplete" else "FAILED" if failed else "FINISHED"
        assert run.info.status == status  # ended, every one: none left RUNNING
        assert bool(run.data.tags.get(ERROR)) == (kind in ("errored", "diverged"))
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    ok = next(tid for tid, kind in kinds.items() if kind == "ok")
    assert parent.data.tags["recommended.trial_id"] == ok
    assert parent.data.params["recommended.batch_size"] == "32"
    assert parent.data.metrics["recommended.images_per_second"] > 0
    assert parent.info.status == "FINISHED"


def test_wandb_offline_files_are_complete_by_training_step_with_each_kind(
    search: dict[str, Any],
) -> None:
    runs: dict[str, tuple[list[str], list[int], int]] = {}
    # A run's files in the order written (the time to target is added in a file of its own
    # after the search: its tags and exit code must still say the run's kind).
    for path in sorted(search["experiment"].glob("wandb/offline-run-*/run-*.wandb")):
        records = list(_wandb_records(path))
        kinds = [r for r in records if r.WhichOneof("record_type") == "exit"]
        assert kinds, f"{path} has no exit record: incomplete"
        run = [r.run for r in records if r.WhichOneof("record_type") == "run"][-1]
        steps = [_history(r)["_step"] for r in records if r.WhichOneof("record_type") == "history"]
        tags = [t.removeprefix("kind: ") for t in run.tags if t.startswith("kind: ")]
        earlier = runs.get(run.run_id, ([], [], 0))[1]
        runs[run.run_id] = (tags, earlier + steps, kinds[-1].exit.exit_code)
    assert {tid: tags for tid, (tags, _, _) in runs.items()} == {
        tid: [kind] for tid, kind in _expected(search).items()
    }
    for trial_dir in _trial_dirs(search["experiment"]):
        trial_id = trial_dir.name.split("_")[1]
        reports = [
            json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()
        ]
        training_steps = list(dict.fromkeys(report[STEP] for report in reports))
        _, steps, exit_code = runs[trial_id]
        assert steps == training_steps  # the training steps, each once
        assert exit_code == (1 if optuna_state(_expected(search)[trial_id]) == "FAIL" else 0)


def test_every_trials_time_to_target_is_in_mlflow_and_wandb_as_in_the_trials_table(
    search: dict[str, Any],
) -> None:
    """Issue 47: the figures trials.csv holds for each trial's time to target, under the same
    names, in its MLflow run and its W&B run's summary (a figure the trial lacks: in neither)."""
    import mlflow

    from tuner.answer import decide
    from tuner.time_to_target import TARGET_COLUMNS

    table = decide(load_experiment(search["experiment"])).trials.set_index("trial_id")
    target = table["target_accuracy"].dropna()
    assert len(target), "the search's answer derived no target"
    client = mlflow.MlflowClient(search["uri"])
    (experiment,) = [e for e in client.search_experiments() if e.name == search["name"]]
    found = client.search_runs([experiment.experiment_id])
    in_mlflow = {
        r.data.tags["trial_name"].rsplit("_", 1)[-1]: {**r.data.metrics, **r.data.tags}
        for r in found
        if "mlflow.parentRunId" in r.data.tags
    }
    in_wandb: dict[str, dict[str, Any]] = {}
    for path in sorted(search["experiment"].glob("wandb/offline-run-*/run-*.wandb")):
        records = list(_wandb_records(path))
        (run_id,) = {r.run.run_id for r in records if r.WhichOneof("record_type") == "run"}
        for r in records:
            if r.WhichOneof("record_type") == "summary":
                items = {i.key: json.loads(i.value_json) for i in r.summary.update if i.key}
                in_wandb.setdefault(run_id, {}).update(items)
    for trial_id, row in table.iterrows():
        expected = {
            c: row[c] for c in TARGET_COLUMNS if isinstance(row[c], str) or row[c] == row[c]
        }
        expected = {c: v for c, v in expected.items() if v is not None and v != ""}
        for client_name, logged in (("MLflow", in_mlflow), ("W&B", in_wandb)):
            got = {c: logged.get(trial_id, {}).get(c) for c in TARGET_COLUMNS}
            got = {c: v for c, v in got.items() if v is not None}
            assert got.keys() == expected.keys(), (client_name, trial_id, got, expected)
            for column, value in expected.items():
                if isinstance(value, str):
                    assert got[column] == value, (client_name, trial_id, column)
                else:
                    assert float(got[column]) == pytest.approx(float(value)), (client_name, column)


def _history(record: Any) -> dict[str, Any]:
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in record.history.item}  # fmt: skip


def _wandb_records(path: Path) -> Iterator[Any]:
    """The records of a ``.wandb`` file, read by the auditor's one reader of its layout
    (tuner.report._audit_clients.wandb_records: wandb 0.31 ships no Python reader)."""
    from tuner.report._audit_clients import wandb_records

    assert path.read_bytes()[:4] == b":W&B", f"{path} is not a W&B run file"
    yield from wandb_records(path)


def test_the_auditor_finds_every_claim_of_every_client_supported(search: dict[str, Any]) -> None:
    """Issue 39: the report of the every-kind search, its console, its TensorBoard files, its
    MLflow store and its W&B runs, each claim checked against the trials table."""
    from tuner.report import write_report
    from tuner.report.audit import audit

    report = write_report(search["experiment"], out_dir=search["scratch"] / "report")
    found = audit(search["experiment"], report_dir=report, console=search["stdout"])
    assert found.ok, "\n".join(found.lines())
    assert not found.notes  # every client was read
