"""The one pairing of a comparison's runs: two arms' finished repeats, aligned on the round."""

from __future__ import annotations

import pandas as pd

__all__ = ["paired"]


def paired(
    runs: pd.DataFrame, name: str, other: str, *, by: str = "arm"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The finished (``status == "ok"``) repeats of ``name`` and ``other``, aligned on the
    repeat: row ``i`` of each was measured in the same round. ``by`` names the arm column."""
    if runs.empty:
        return runs, runs
    ok = runs[runs["status"] == "ok"]
    mine = ok[ok[by] == name].set_index("repeat")
    theirs = ok[ok[by] == other].set_index("repeat")
    common = mine.index.intersection(theirs.index)
    return mine.loc[common], theirs.loc[common]
