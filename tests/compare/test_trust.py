"""When re-measured candidates count as separated (:mod:`tuner.compare.trust`; choosing them:
tests/test_answer.py)."""

from __future__ import annotations

import pandas as pd

from tuner.compare.trust import separated


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
