"""Every kind of trial in a trials table: a folder laid out as Ray writes it, each trial's
result.json made of real reports (tuner.record.trial_report of real RunResults)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuner import record
from tuner.engine import RunResult
from tuner.experiment import load_experiment, read_trials_csv, write_trials_csv

MIB = 2**20


def _report(result: RunResult | dict[str, Any], *, final: bool) -> dict[str, Any]:
    return record.trial_report(
        result,
        max_memory_bytes=200 * MIB,
        phase="train",
        node="n",
        final=final,
        counters={record.ENGINE_TIME_S: 2.0},
    )


OK = RunResult(status="ok", images_per_second=900.0, val_accuracy=0.8, peak_memory_bytes=MIB)
OVER = RunResult(status="ok", images_per_second=900.0, peak_memory_bytes=300 * MIB)
# kind -> (its reports, Ray's status of the trial)
TRIALS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "ok": ([_report(OK, final=False), _report(OK, final=True)], "TERMINATED"),
    "stopped early": ([_report(OK, final=False)], "TERMINATED"),
    "over budget": ([_report(OVER, final=True)], "TERMINATED"),
    "diverged": ([_report(RunResult(status="diverged"), final=True)], "TERMINATED"),
    "errored": ([_report(OK, final=False)], "ERROR"),  # the process died after a report
    "incomplete": ([_report(OK, final=False)], "RUNNING"),
}


def _write_folder(path: Path) -> dict[str, str]:
    """Ray's layout: one folder per trial, and the experiment state naming their statuses."""
    states, ids = [], {}
    for number, (kind, (reports, status)) in enumerate(TRIALS.items()):
        trial_id = f"0000{number}"
        folder = path / f"t_{trial_id}_{number}"
        folder.mkdir(parents=True)
        (folder / "params.json").write_text(json.dumps({"batch_size": 8 * (number + 1)}))
        lines = [{**r, "trial_id": trial_id, "timestamp": 1e9 + i} for i, r in enumerate(reports)]
        (folder / "result.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
        state = {"trial_id": trial_id, "status": status, "relative_logdir": folder.name}
        states.append([json.dumps(state), json.dumps({})])
        ids[trial_id] = kind
    (path / "experiment_state-2026-01-01_00-00-00.json").write_text(
        json.dumps({"trial_data": states})
    )
    return ids


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    return tmp_path, _write_folder(tmp_path)


def test_each_trial_reads_as_its_kind(folder: tuple[Path, dict[str, str]]) -> None:
    path, kinds = folder
    trials = load_experiment(path).trials.set_index(record.TRIAL_ID)
    assert trials[record.KIND].to_dict() == kinds
    # feasible: ran ok within the budget; a trial stopped early did (and is still no pick).
    feasible = trials[record.FEASIBLE].to_dict()
    assert {kinds[t] for t, f in feasible.items() if f} == {"ok", "stopped early", "incomplete"}
    errored = trials.loc[trials[record.KIND] == "errored"].iloc[0]
    assert errored[record.STATUS] == "error" and errored[record.RAY_STATUS] == "ERROR"


def test_kind_survives_the_csv_round_trip(folder: tuple[Path, dict[str, str]]) -> None:
    path, _ = folder
    trials = load_experiment(path).trials
    write_trials_csv(trials, path / "trials.csv")
    again = read_trials_csv(path / "trials.csv")
    assert again[record.KIND].tolist() == trials[record.KIND].tolist()
    assert again.dtypes.to_dict() == trials.dtypes.to_dict()
