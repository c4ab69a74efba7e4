"""After the search: choosing the candidates (objectives), and when re-measured candidates count
as separated (:mod:`tuner.compare.trust`)."""

from __future__ import annotations

import pandas as pd
import pytest

from tuner.compare.trust import separated
from tuner.objectives import objectives_of, pareto_front, rank_candidates


def _trials() -> pd.DataFrame:
    rows = [
        ("fast", 1000, 0.5, True),
        ("accurate", 200, 0.9, True),
        ("balanced", 600, 0.8, True),
        ("dominated", 500, 0.7, True),  # beaten by "balanced" on both
        ("over_budget", 5000, 0.99, False),
        ("stopped_early", 4000, 0.95, False),  # a trials table marks it not feasible
    ]
    return pd.DataFrame(rows, columns=["trial_id", "images_per_second", "val_accuracy", "feasible"])


def test_pareto_front_skips_dominated_and_unusable_trials() -> None:
    front = pareto_front(_trials(), objectives_of("pareto"))
    assert list(front["trial_id"]) == ["fast", "balanced", "accurate"]


def test_candidates_fill_from_the_next_front() -> None:
    picked = rank_candidates(_trials(), objectives_of("pareto"), top=4)
    assert list(picked["trial_id"]) == ["accurate", "balanced", "fast", "dominated"]


@pytest.mark.parametrize(("objective", "first"), [("throughput", "fast"), ("accuracy", "accurate")])
def test_single_objective_candidates(objective: str, first: str) -> None:
    assert rank_candidates(_trials(), objectives_of(objective), top=1)["trial_id"].iloc[0] == first


def _runs(samples: list[list[float]]) -> pd.DataFrame:
    """Candidate ``i``'s repeat ``r`` measured ``samples[i][r]`` images/s."""
    rows = [
        {"candidate": i, "repeat": r, "status": "ok", "images_per_second": value}
        for i, values in enumerate(samples)
        for r, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def test_separated_needs_every_adjacent_pair_apart() -> None:
    apart = [[100.0, 104.0, 98.0], [200.0, 190.0, 210.0]]
    assert separated(_runs(apart))
    close = [[100.0, 104.0, 98.0], [101.0, 99.0, 103.0], [200.0, 190.0, 210.0]]
    assert not separated(_runs(close))
    assert separated(_runs([[100.0]]))  # one candidate: nothing to tell apart


def test_a_failed_repeat_leaves_its_pair_out() -> None:
    runs = _runs([[100.0, 101.0, 99.0, 100.0], [200.0, 190.0, 210.0, 5.0]])
    runs.loc[(runs["candidate"] == 1) & (runs["repeat"] == 3), "status"] = "oom"
    assert separated(runs)
