"""Technique effects, observational: trials with a switch on vs off, medians and counts.

This is not a controlled experiment (other settings vary between the two groups); the
controlled comparison is ``tuner ablate``. Every row says how many trials support it.
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["TECHNIQUES", "technique_effects"]

# Switch -> the value that means "off" (the baseline of the comparison).
TECHNIQUES: dict[str, object] = {
    "amp": "off",
    "set_to_none": False,
    "non_blocking": False,
    "pin_memory": False,
    "prefetch": "off",
    "channels_last": False,
    "compile": "off",
    "norm": "batch",
}
METRICS = ("images_per_second", "peak_memory_bytes", "val_accuracy")
COLUMNS = [
    "technique",
    "setting",
    "baseline",
    "trials_on",
    "trials_off",
    "images_per_second_on",
    "images_per_second_off",
    "throughput_change_pct",
    "peak_memory_bytes_on",
    "peak_memory_bytes_off",
    "memory_change_pct",
    "val_accuracy_on",
    "val_accuracy_off",
    "accuracy_change_points",
]


def technique_effects(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (switch, non-baseline value) among the searched switches.

    Only trials that finished (status ``ok``) count; medians are over those trials.
    GroupNorm rows are split by group count when ``gn_groups`` was searched.
    """
    done = trials[trials["status"] == "ok"]
    rows: list[dict[str, object]] = []
    for name, off in TECHNIQUES.items():
        column = f"param_{name}"
        if column not in done or done[column].nunique(dropna=True) < 1:
            continue
        values = done[column]
        base = done[_equals(values, off)]
        for setting in sorted({v for v in values.dropna() if not _same(v, off)}, key=str):
            rows.extend(_rows_for(name, setting, off, done[_equals(values, setting)], base))
    return pd.DataFrame(rows, columns=COLUMNS)


def _rows_for(
    name: str, setting: object, off: object, on: pd.DataFrame, base: pd.DataFrame
) -> list[dict[str, object]]:
    groups = [(str(setting), on)]
    if name == "norm" and setting == "group" and "param_gn_groups" in on:
        groups += [
            (f"group, {int(g)} groups", on[on["param_gn_groups"] == g])
            for g in sorted(on["param_gn_groups"].dropna().unique())
        ]
    return [_row(name, label, off, subset, base) for label, subset in groups]


def _row(
    name: str, setting: str, off: object, on: pd.DataFrame, base: pd.DataFrame
) -> dict[str, object]:
    row: dict[str, object] = {
        "technique": name,
        "setting": setting,
        "baseline": str(off),
        "trials_on": len(on),
        "trials_off": len(base),
    }
    for metric in METRICS:
        row[f"{metric}_on"] = _median(on, metric)
        row[f"{metric}_off"] = _median(base, metric)
    row["throughput_change_pct"] = _pct(row["images_per_second_on"], row["images_per_second_off"])
    row["memory_change_pct"] = _pct(row["peak_memory_bytes_on"], row["peak_memory_bytes_off"])
    acc_on, acc_off = row["val_accuracy_on"], row["val_accuracy_off"]
    row["accuracy_change_points"] = 100 * (acc_on - acc_off)  # type: ignore[operator]
    return row


def _median(frame: pd.DataFrame, metric: str) -> float:
    values = pd.to_numeric(frame[metric], errors="coerce").dropna()
    return float(values.median()) if len(values) else math.nan


def _pct(on: object, off: object) -> float:
    if not isinstance(on, float) or not isinstance(off, float) or not off:
        return math.nan
    return 100.0 * (on / off - 1.0)


def _same(a: object, b: object) -> bool:
    return str(a) == str(b)


def _equals(values: pd.Series, target: object) -> pd.Series:
    return values.map(lambda v: _same(v, target)).astype(bool) & values.notna()
