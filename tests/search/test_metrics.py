"""What every trial reports, feasibility and the memory constraint, from real RunResults."""

from __future__ import annotations

import math
import typing

import pytest

from tuner.engine import RunResult
from tuner.results import trial_dtypes
from tuner.search.metrics import objective_metrics, trial_metrics
from tuner.techniques import KNOBS

MIB = 2**20


def _metrics(result: RunResult, budget: int | None) -> dict:
    return trial_metrics(
        result, max_memory_bytes=budget, phase="train", node="n", engine_time_s=1.0, final=True
    )


def _ok(peak: int) -> RunResult:
    return RunResult(status="ok", images_per_second=900.0, val_accuracy=0.8, peak_memory_bytes=peak)


def test_a_run_within_budget_is_feasible() -> None:
    m = _metrics(_ok(100 * MIB), 200 * MIB)
    assert m["feasible"] and m["infeasible_reason"] == ""
    assert m["images_per_second"] == 900.0 and m["val_accuracy"] == 0.8
    assert m["memory_violation"] == pytest.approx(-0.5)


def test_over_budget_is_infeasible_and_keeps_its_measurement() -> None:
    m = _metrics(_ok(300 * MIB), 200 * MIB)
    assert not m["feasible"] and m["infeasible_reason"] == (
        "peak memory 300.0 MiB over the budget 200.0 MiB"
    )
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


def test_every_report_has_the_same_keys() -> None:
    keys = {frozenset(_metrics(r, 10 * MIB)) for r in (_ok(MIB), RunResult(status="error"))}
    assert len(keys) == 1


def test_what_ran_is_reported_flat_per_registry_knob() -> None:
    result = RunResult(
        status="ok",
        effective={"prefetch": "off", "amp": "bf16", "num_workers": 0},
        notes=["prefetch=cuda_stream needs CUDA; fell back", "another note"],
    )
    m = _metrics(result, None)
    assert {f"effective_{k.field}" for k in KNOBS} <= set(m)
    assert m["effective_prefetch"] == "off" and m["effective_amp"] == "bf16"
    assert m["effective_num_workers"] == 0 and m["effective_compile"] == ""
    assert m["notes"] == "prefetch=cuda_stream needs CUDA; fell back | another note"


def test_objectives_per_mode() -> None:
    assert objective_metrics("pareto") == ["images_per_second", "val_accuracy"]
    assert objective_metrics("accuracy") == ["val_accuracy"]


def test_every_reported_key_has_a_declared_dtype() -> None:
    # trials.csv reads back with the same dtypes only for declared columns (tuner.results).
    undeclared = [key for key, dtype in trial_dtypes(_metrics(_ok(MIB), None)).items() if not dtype]
    assert undeclared == []


RESULT_HINTS = typing.get_type_hints(RunResult)


@pytest.mark.parametrize(
    "name", [n for n, hint in RESULT_HINTS.items() if typing.get_origin(hint) not in (list, dict)]
)
def test_run_result_fields_keep_their_kind_in_the_trials_table(name: str) -> None:
    hint = RESULT_HINTS[name]
    kinds = {a for a in typing.get_args(hint) if a is not type(None)} or {hint}
    expected = "Int64" if int in kinds else "float64" if float in kinds else "string"
    assert trial_dtypes([name])[name] == expected
