"""Each arm's medians with intervals, and its paired changes against its reference and baseline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import pandas as pd

from tuner.compare._arms import Arm
from tuner.compare._interleave import paired
from tuner.stats import accuracy_difference, median_interval, paired_difference, paired_ratio

__all__ = ["summarize"]


def summarize(runs: pd.DataFrame, arms: Sequence[Arm] | None = None) -> pd.DataFrame:
    """Per arm: medians with intervals, and paired changes vs its reference and baseline.

    Without ``arms`` they are read back from the runs' ``arm``/``reference``/``baseline``
    columns (a runs file written earlier), in order of appearance.
    """
    specs = (
        [(a.name, a.group, a.reference, a.baseline) for a in arms]
        if arms is not None
        else _specs(runs)
    )
    rows = []
    for name, group, reference, baseline in specs:
        row = _arm_summary(runs, name, group, reference)
        for label, other in (("reference", reference), ("baseline", baseline)):
            row.update(_changes(runs, name, other if other != name else None, label))
        rows.append(row)
    return pd.DataFrame(rows)


def _specs(runs: pd.DataFrame) -> list[tuple[str, str, str | None, str | None]]:
    if runs.empty:
        return []
    first = runs.drop_duplicates("arm")
    return [
        (str(r["arm"]), str(r["group"]), str(r["reference"]) or None, str(r["baseline"]) or None)
        for _, r in first.fillna("").iterrows()
    ]


def _arm_summary(
    runs: pd.DataFrame, name: str, group: str, reference: str | None
) -> dict[str, Any]:
    every = runs[runs["arm"] == name] if not runs.empty else runs
    ok = every[every["status"] == "ok"] if not every.empty else every
    row: dict[str, Any] = {
        "arm": name,
        "group": group,
        "reference": reference or "",
        "repeats_ok": f"{len(ok)}/{len(every)}",
    }
    for column in ("images_per_second", "peak_memory_bytes", "val_accuracy"):
        values = ok[column].tolist() if column in ok else []
        est = median_interval(values)
        row[column], row[f"{column}_low"], row[f"{column}_high"] = est.median, est.low, est.high
    row["memory_kind"] = next(iter(ok["memory_kind"].dropna()), "") if len(ok) else ""
    fell_back = set(every["fell_back"].fillna("")) - {""} if len(every) else set()
    row["fell_back"] = "; ".join(sorted(fell_back))
    failed = set(every.loc[every["status"] != "ok", "status"]) if len(every) else set()
    row["failed"] = "; ".join(sorted(failed))
    return row


def _changes(runs: pd.DataFrame, name: str, other: str | None, label: str) -> dict[str, Any]:
    """Paired changes of arm ``name`` against arm ``other`` (NaN when there is none)."""
    mine, theirs = paired(runs, name, other) if other else (pd.DataFrame(), pd.DataFrame())
    out: dict[str, Any] = {}
    images = [*theirs.get("val_images", []), *mine.get("val_images", [])]
    specs = (
        ("throughput_ratio", "images_per_second", paired_ratio),
        ("memory_change_bytes", "peak_memory_bytes", paired_difference),
        # Accuracy: the validation set's sampling error counts too (same-seed repeats agree).
        ("accuracy_change", "val_accuracy", partial(accuracy_difference, images=images)),
    )
    for key, column, estimate in specs:
        if other is None or mine.empty:
            out[f"{key}_vs_{label}"] = math.nan
            out[f"{key}_vs_{label}_low"] = out[f"{key}_vs_{label}_high"] = math.nan
            out[f"{key}_vs_{label}_tie"] = True
            continue
        change = estimate(theirs[column].tolist(), mine[column].tolist())
        out[f"{key}_vs_{label}"] = change.value
        out[f"{key}_vs_{label}_low"], out[f"{key}_vs_{label}_high"] = change.low, change.high
        out[f"{key}_vs_{label}_tie"] = change.tie
    return out
