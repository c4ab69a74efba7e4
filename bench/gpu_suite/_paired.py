"""A paired column beyond images/s: median [interval] per arm and its paired ratio against the
arm's reference and baseline (the recipe stage's epoch time)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tuner.compare import Arm, paired
from tuner.stats import median_interval, paired_ratio

__all__ = ["paired_column"]


def paired_column(runs: pd.DataFrame, column: str, arms: Sequence[Arm]) -> pd.DataFrame:
    """Median [interval] of ``column`` per arm and its paired ratio against the arm's reference
    and baseline (as :func:`tuner.compare.summarize` does for images/s): one row per arm."""
    rows = []
    for arm in arms:
        mine = runs[(runs["status"] == "ok") & (runs["arm"] == arm.name)] if len(runs) else runs
        est = median_interval(mine[column].tolist() if len(mine) else [])
        row = {"arm": arm.name, column: est.median}
        row[f"{column}_low"], row[f"{column}_high"] = est.low, est.high
        for label, other in (("reference", arm.reference), ("baseline", arm.baseline)):
            ours, theirs = paired(runs, arm.name, other) if other else (runs[:0], runs[:0])
            if other == arm.name or ours.empty:
                continue
            change = paired_ratio(theirs[column].tolist(), ours[column].tolist())
            key = f"{column}_ratio_vs_{label}"
            row[key], row[f"{key}_low"], row[f"{key}_high"] = change.value, change.low, change.high
            row[f"{key}_tie"], row[f"{key}_n"] = change.tie, change.n
            row[f"{key}_verdict"] = change.verdict  # the one rule (tuner.stats)
        rows.append(row)
    return pd.DataFrame(rows)
