"""A real search end to end on CPU: local Ray, Optuna's SQLite study, the real engine.

One search (module fixture) over ``spaces/e2e_space.py`` with the grid sampler, so the four
trials are known in advance: batch 8 fits, batch 512 is over the 300 MiB budget (its probe
says so in seconds), and ``gn_groups=3`` makes the engine raise inside the trial.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import optuna
import pytest

from tuner.search import SearchOptions, SearchOutcome, parse_memory_size, run_search
from tuner.search.metrics import OBJECTIVE_KEYS

pytestmark = pytest.mark.slow

SPACE = Path(__file__).parent / "spaces" / "e2e_space.py"
BUDGET = parse_memory_size("300MiB")
METRIC_KEYS = {
    "status", "error", "images_per_second", "peak_memory_bytes", "memory_kind", "val_accuracy",
    "val_loss", "steps", "feasible", "infeasible_reason", "phase", "node", "engine_time_s",
    "memory_violation", *OBJECTIVE_KEYS.values(),
}  # fmt: skip


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> SearchOutcome:
    root = tmp_path_factory.mktemp("search")
    options = SearchOptions(
        space=str(SPACE),
        name="e2e",
        storage=str(root / "experiments"),
        reports_dir=str(root / "reports"),
        sampler="grid",
        max_memory_bytes=BUDGET,
        max_failures=0,  # gn_groups=3 fails the same way every time
        remeasure_top=1,
        remeasure_repeats=2,
        report=False,
    )
    return run_search(options)


def _by_params(outcome: SearchOutcome) -> dict[tuple[int, int], Any]:
    return {(r.config["batch_size"], r.config["gn_groups"]): r for r in outcome.records}


def _result_lines(trial_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]


def test_every_trial_ran_and_has_a_status_and_metrics(outcome: SearchOutcome) -> None:
    assert outcome.state == "finished"
    assert len(outcome.records) == 4
    trial_dirs = sorted(p.parent for p in outcome.experiment_dir.glob("*/result.json"))
    assert len(trial_dirs) == 4
    for trial_dir in trial_dirs:
        lines = _result_lines(trial_dir)
        assert lines, f"{trial_dir.name} reported nothing"
        assert all(set(line) >= METRIC_KEYS for line in lines)
        params = json.loads((trial_dir / "params.json").read_text())
        assert params["model"] == "vit_tiny_r_s16_p8_224"  # the fixed workload is recorded
        assert params["batch_size"] in (8, 512)


def test_a_trial_that_fits_trained_and_measured(outcome: SearchOutcome) -> None:
    record = _by_params(outcome)[(8, 4)]
    assert record.ray_status == "TERMINATED"
    m = record.metrics
    assert m["status"] == "ok" and m["feasible"] and m["final"] and m["phase"] == "train"
    assert m["steps"] == 8
    assert m["images_per_second"] > 0 and 0 <= m["val_accuracy"] <= 1
    assert 0 < m["peak_memory_bytes"] <= BUDGET
    assert m[OBJECTIVE_KEYS["throughput"]] == m["images_per_second"]
    assert m[OBJECTIVE_KEYS["accuracy"]] == m["val_accuracy"]
    assert m["engine_time_s"] > 0


def test_over_budget_trial_is_marked_infeasible_with_its_measurement(
    outcome: SearchOutcome,
) -> None:
    m = _by_params(outcome)[(512, 4)].metrics
    assert not m["feasible"]
    assert m["phase"] == "probe"  # rejected by the probe, never trained
    assert m["peak_memory_bytes"] > BUDGET
    assert "over the budget" in m["infeasible_reason"]
    assert m["memory_violation"] > 0
    assert m[OBJECTIVE_KEYS["throughput"]] == 0 and m[OBJECTIVE_KEYS["accuracy"]] == 0
    assert m["images_per_second"] > 0  # the real measurement is kept


def test_a_trial_that_raises_does_not_stop_the_others(outcome: SearchOutcome) -> None:
    failed = [r for r in outcome.records if r.config["gn_groups"] == 3]
    assert len(failed) == 2
    for record in failed:
        assert record.ray_status == "ERROR"
        assert record.metrics["status"] == "error"
        assert "gn_groups" in record.metrics["error"] or "groups" in record.metrics["error"]
    assert sum(r.ray_status == "TERMINATED" for r in outcome.records) == 2


def test_sqlite_study_holds_the_same_trials_as_ray(outcome: SearchOutcome) -> None:
    study = optuna.load_study(
        study_name="e2e", storage=f"sqlite:///{outcome.experiment_dir / 'study.db'}"
    )
    by_ray_id = {t.user_attrs["ray_trial_id"]: t for t in study.trials}
    assert len(by_ray_id) == len(study.trials) == 4
    assert set(by_ray_id) == {r.trial_id for r in outcome.records}
    for record in outcome.records:
        trial = by_ray_id[record.trial_id]
        assert trial.params["batch_size"] == record.config["batch_size"]
        if record.ray_status == "ERROR":
            assert trial.state == optuna.trial.TrialState.FAIL
            continue
        assert trial.state == optuna.trial.TrialState.COMPLETE
        expected = [record.metrics[key] for key in OBJECTIVE_KEYS.values()]
        assert trial.values == pytest.approx(expected)
        violation = record.metrics["memory_violation"]
        assert trial.user_attrs["memory_violation"] == pytest.approx(violation)
        if hasattr(trial, "constraints") and trial.constraints:  # Optuna >= 5
            assert list(trial.constraints.values()) == pytest.approx([violation])
        assert (violation > 0) == (record.config["batch_size"] == 512)


def test_metadata_and_remeasure_files(outcome: SearchOutcome) -> None:
    meta = json.loads((outcome.experiment_dir / "tuner_experiment.json").read_text())
    assert meta["state"] == "finished" and meta["num_trials"] == 4
    assert meta["sampler"] == "grid" and meta["max_memory_bytes"] == BUDGET
    assert meta["resources_per_trial"]["gpu"] == 0 and meta["gpus_shared"] is False
    assert [o["metric"] for o in meta["objectives"]] == list(OBJECTIVE_KEYS.values())
    with (outcome.experiment_dir / "remeasure.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2  # top 1 candidate x 2 repeats
    assert {row["trial_id"] for row in rows} <= {r.trial_id for r in outcome.records}
    assert all(math.isfinite(float(row["images_per_second"])) for row in rows)
