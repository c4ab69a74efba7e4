"""The one pairing of a comparison's runs (:func:`paired`), each arm's medians with intervals
and its paired changes against its reference and baseline (:func:`summarize`,
:func:`paired_column`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pandas as pd

from tuner.stats import accuracy_difference, median_interval, paired_difference, paired_ratio

if TYPE_CHECKING:
    from tuner.compare._arms import Arm  # the owner: the package's __init__ imports measure

__all__ = ["paired", "paired_column", "summarize"]


def paired(
    runs: pd.DataFrame, name: str, other: str, *, by: str = "arm"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ok repeats of arms ``name`` and ``other`` (column ``by``), aligned on the round."""
    if runs.empty:
        return runs, runs
    ok = runs[runs["status"] == "ok"]
    mine = ok[ok[by] == name].set_index("repeat")
    theirs = ok[ok[by] == other].set_index("repeat")
    common = mine.index.intersection(theirs.index)
    return mine.loc[common], theirs.loc[common]


def summarize(runs: pd.DataFrame, arms: Sequence[Arm] | None = None) -> pd.DataFrame:
    """Per arm: medians with intervals, and paired changes vs its reference and baseline
    (without ``arms``: read back from the runs' columns, in order of appearance)."""
    if "arm" not in runs:  # nothing ran: a table without columns
        runs = pd.DataFrame(columns=["arm", "status", "memory_kind", "fell_back"])
    if arms is None:
        first = runs.drop_duplicates("arm").fillna("")
        specs = [
            (str(r.arm), str(r.group), str(r.reference) or None, str(r.baseline) or None)
            for r in first.itertuples()
        ]
    else:
        specs = [(a.name, a.group, a.reference, a.baseline) for a in arms]
    rows = []
    for name, group, reference, baseline in specs:
        row = _arm_summary(runs, name, group, reference)
        for label, other in (("reference", reference), ("baseline", baseline)):
            row.update(_changes(runs, name, other if other != name else None, label))
        rows.append(row)
    return pd.DataFrame(rows)


def _arm_summary(
    runs: pd.DataFrame, name: str, group: str, reference: str | None
) -> dict[str, Any]:
    every = runs[runs["arm"] == name]
    ok = every[every["status"] == "ok"]
    row: dict[str, Any] = {
        "arm": name,
        "group": group,
        "reference": reference or "",
        "repeats_ok": f"{len(ok)}/{len(every)}",
    }
    for column in ("images_per_second", "peak_memory_bytes", "val_accuracy", "data_wait_fraction"):
        est = median_interval(ok[column].tolist() if column in ok else [])
        row[column], row[f"{column}_low"], row[f"{column}_high"] = est.median, est.low, est.high
    row["memory_kind"] = next(iter(ok["memory_kind"].dropna()), "")
    row["fell_back"] = "; ".join(sorted(set(every["fell_back"].fillna("")) - {""}))
    row["failed"] = "; ".join(sorted(set(every.loc[every["status"] != "ok", "status"])))
    return row


def _changes(runs: pd.DataFrame, name: str, other: str | None, label: str) -> dict[str, Any]:
    """Paired changes of arm ``name`` against arm ``other`` (NaN, a tie, when there is none)."""
    mine, theirs = paired(runs, name, other) if other else (runs[:0], runs[:0])
    images = [*theirs.get("val_images", []), *mine.get("val_images", [])]
    specs = (
        ("throughput_ratio", "images_per_second", paired_ratio),
        ("memory_change_bytes", "peak_memory_bytes", paired_difference),
        # Accuracy: the validation set's sampling error counts too (same-seed repeats agree).
        ("accuracy_change", "val_accuracy", partial(accuracy_difference, images=images)),
    )
    out: dict[str, Any] = {}
    for key, column, estimate in specs:
        value, low, high, tie, n, said = math.nan, math.nan, math.nan, True, 0, "none"
        if not mine.empty:
            change = estimate(theirs[column].tolist(), mine[column].tolist())
            value, low, high, n = change.value, change.low, change.high, change.n
            tie, said = change.tie, change.verdict
        prefix = f"{key}_vs_{label}"
        out.update({prefix: value, f"{prefix}_low": low, f"{prefix}_high": high})
        out.update({f"{prefix}_tie": tie, f"{prefix}_n": n})  # n: the pairs it is made of
        out[f"{prefix}_verdict"] = said  # stats.Change.verdict: the one rule, stated once
    return out


def paired_column(runs: pd.DataFrame, column: str, arms: Sequence[Arm]) -> pd.DataFrame:
    """Median [interval] of ``column`` per arm and its paired ratio vs its reference and
    baseline (as :func:`summarize` does for images/s)."""
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
