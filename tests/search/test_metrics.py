"""Feasibility and the objectives Optuna sees, from real RunResults."""

from __future__ import annotations

import math

import pytest

from tuner.engine import RunResult
from tuner.search.metrics import OBJECTIVE_KEYS, objective_metrics, trial_metrics

MIB = 2**20


def _metrics(result: RunResult, budget: int | None) -> dict:
    return trial_metrics(
        result, max_memory_bytes=budget, phase="train", node="n", engine_time_s=1.0, final=True
    )


def _ok(peak: int) -> RunResult:
    return RunResult(status="ok", images_per_second=900.0, val_accuracy=0.8, peak_memory_bytes=peak)


def test_a_run_within_budget_is_feasible_and_its_objectives_are_its_measurements() -> None:
    m = _metrics(_ok(100 * MIB), 200 * MIB)
    assert m["feasible"] and m["infeasible_reason"] == ""
    assert m[OBJECTIVE_KEYS["throughput"]] == 900.0 and m[OBJECTIVE_KEYS["accuracy"]] == 0.8
    assert m["memory_violation"] == pytest.approx(-0.5)


def test_over_budget_is_infeasible_with_a_bad_objective_and_its_measurement_kept() -> None:
    m = _metrics(_ok(300 * MIB), 200 * MIB)
    assert not m["feasible"] and "over the budget" in m["infeasible_reason"]
    assert m[OBJECTIVE_KEYS["throughput"]] == 0 and m[OBJECTIVE_KEYS["accuracy"]] == 0
    assert m["images_per_second"] == 900.0 and m["peak_memory_bytes"] == 300 * MIB
    assert m["memory_violation"] == pytest.approx(0.5)


@pytest.mark.parametrize("budget", [None, 200 * MIB])
def test_oom_violates_even_without_a_measured_peak(budget: int | None) -> None:
    m = _metrics(RunResult(status="oom", error="CUDA out of memory"), budget)
    assert not m["feasible"] and m["infeasible_reason"].startswith("oom")
    assert m["memory_violation"] >= 1.0
    assert math.isnan(m["peak_memory_bytes"])  # missing numbers are NaN, never left out


def test_diverged_run_is_infeasible_but_not_a_memory_violation() -> None:
    result = RunResult(status="diverged", images_per_second=500.0, peak_memory_bytes=MIB)
    m = _metrics(result, 200 * MIB)
    assert not m["feasible"] and m["memory_violation"] < 0
    assert m[OBJECTIVE_KEYS["throughput"]] == 0


def test_every_report_has_the_same_keys() -> None:
    keys = {frozenset(_metrics(r, 10 * MIB)) for r in (_ok(MIB), RunResult(status="error"))}
    assert len(keys) == 1


def test_objectives_per_mode() -> None:
    assert objective_metrics("pareto") == list(OBJECTIVE_KEYS.values())
    assert objective_metrics("accuracy") == [OBJECTIVE_KEYS["accuracy"]]
