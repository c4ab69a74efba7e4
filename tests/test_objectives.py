"""Objectives, feasibility, the memory constraint and dominance (tuner.objectives)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tuner.objectives import (
    OBJECTIVE_NAMES,
    best_per_objective,
    judge,
    memory_violation,
    nondominated_ranks,
    objective_directions,
    objective_metrics,
    objectives_of,
    pareto_front,
    pareto_mask,
    rank_candidates,
    report_objectives,
    told_violation,
)

MIB = 2**20


def _pool() -> pd.DataFrame:
    rows = [
        ("fast", 1000, 0.5),
        ("accurate", 200, 0.9),
        ("balanced", 600, 0.8),
        ("dominated", 500, 0.7),  # beaten by "balanced" on both
        ("unmeasured", float("nan"), float("nan")),  # measured nothing: never picked
    ]
    return pd.DataFrame(rows, columns=["trial_id", "images_per_second", "val_accuracy"])


@pytest.mark.parametrize("name", OBJECTIVE_NAMES)
def test_every_objective_names_metrics_and_directions(name: str) -> None:
    assert list(zip(objective_metrics(name), objective_directions(name), strict=True)) == (
        objectives_of(name)
    )
    # The report always shows both objectives, the searched one first.
    shown = report_objectives({"objective": name})
    assert shown[0] == objectives_of(name)[0] and len(shown) == 2


def test_objectives_per_mode() -> None:
    assert objective_metrics("pareto") == ["images_per_second", "val_accuracy"]
    assert objective_metrics("accuracy") == ["val_accuracy"]


@pytest.mark.parametrize(
    ("metrics", "feasible", "violation"),
    [
        ({"status": "ok", "peak_memory_bytes": 100 * MIB}, True, -0.5),
        ({"status": "ok", "peak_memory_bytes": 300 * MIB}, False, 0.5),
        ({"status": "oom"}, False, 1.0),
        ({"status": "diverged", "peak_memory_bytes": MIB}, False, -0.995),
    ],
)
def test_feasibility_and_the_memory_constraint(
    metrics: dict, feasible: bool, violation: float
) -> None:
    assert judge(metrics, max_memory_bytes=200 * MIB)[0] is feasible
    assert memory_violation(metrics, max_memory_bytes=200 * MIB) == pytest.approx(violation)


def test_pareto_mask_and_ranks() -> None:
    points = np.array([[1.0, 1.0], [2.0, 0.5], [0.5, 0.5]])
    assert pareto_mask(points, ["max", "max"]).tolist() == [True, True, False]
    assert nondominated_ranks(points, ["max", "max"]).tolist() == [0, 0, 1]


def test_pareto_front_skips_dominated_and_unmeasured_rows() -> None:
    front = pareto_front(_pool(), objectives_of("pareto"))
    assert list(front["trial_id"]) == ["fast", "balanced", "accurate"]


def test_candidates_fill_from_the_next_front() -> None:
    picked = rank_candidates(_pool(), objectives_of("pareto"), top=4)
    assert list(picked["trial_id"]) == ["accurate", "balanced", "fast", "dominated"]


@pytest.mark.parametrize(("objective", "first"), [("throughput", "fast"), ("accuracy", "accurate")])
def test_single_objective_candidates(objective: str, first: str) -> None:
    assert rank_candidates(_pool(), objectives_of(objective), top=1)["trial_id"].iloc[0] == first


def test_best_per_objective() -> None:
    best = best_per_objective(_pool(), objectives_of("pareto"))
    assert {m: row["trial_id"] for m, row in best.items()} == {
        "images_per_second": "fast",
        "val_accuracy": "accurate",
    }


def test_a_peak_never_measured_gives_no_memory_violation() -> None:
    """Issue 39: errored trials carried memory_violation = -1.0 in every client; a value nobody
    measured is missing. An OOM is over budget whether its peak was measured or not."""
    assert math.isnan(memory_violation({"status": "error"}, max_memory_bytes=200 * MIB))
    assert math.isnan(memory_violation({"status": "error"}, max_memory_bytes=None))
    assert memory_violation({"status": "oom"}, max_memory_bytes=None) > 0
    assert told_violation(math.nan) == -1.0 and told_violation(0.5) == 0.5  # Optuna's view
