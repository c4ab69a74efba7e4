"""Choosing the candidates to re-measure, and the spread of the re-measured numbers."""

from __future__ import annotations

import math

import pytest

from tuner.search.remeasure import TrialRecord, pareto_front, pick_candidates, summarize


def _trial(tid: str, ips: float, acc: float, *, feasible: bool = True, final: bool = True):
    metrics = {"images_per_second": ips, "val_accuracy": acc, "feasible": feasible, "final": final}
    return TrialRecord(trial_id=tid, config={}, metrics=metrics, ray_status="TERMINATED")


TRIALS = [
    _trial("fast", 1000, 0.5),
    _trial("accurate", 200, 0.9),
    _trial("balanced", 600, 0.8),
    _trial("dominated", 500, 0.7),  # beaten by "balanced" on both
    _trial("over_budget", 5000, 0.99, feasible=False),
    _trial("stopped_early", 4000, 0.95, final=False),
]


def test_pareto_front_skips_dominated_infeasible_and_unfinished_trials() -> None:
    assert [r.trial_id for r in pareto_front(TRIALS)] == ["accurate", "balanced", "fast"]


def test_candidates_fill_from_the_next_front() -> None:
    picked = pick_candidates(TRIALS, objective="pareto", top=4)
    assert [r.trial_id for r in picked] == ["accurate", "balanced", "fast", "dominated"]


@pytest.mark.parametrize(("objective", "first"), [("throughput", "fast"), ("accuracy", "accurate")])
def test_single_objective_candidates(objective: str, first: str) -> None:
    assert pick_candidates(TRIALS, objective=objective, top=1)[0].trial_id == first


def test_summary_has_mean_and_sample_std() -> None:
    rows = [{"trial_id": "a", "images_per_second": v} for v in (90.0, 100.0, 110.0)]
    rows.append({"trial_id": "b", "images_per_second": 50.0})
    stats = summarize(rows)
    assert stats["a"]["mean"] == pytest.approx(100.0) and stats["a"]["std"] == pytest.approx(10.0)
    assert stats["b"]["n"] == 1 and math.isnan(stats["b"]["std"])
