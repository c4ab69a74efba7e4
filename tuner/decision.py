"""The figures the answer decides on, per trial (throughput re-measured side by side where it
was, accuracy over every seed it was trained with, each with its interval), and the two tests
between two trials (a throughput ratio, an accuracy difference).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.compare.seeds import seed_accuracies
from tuner.measure import paired
from tuner.objectives import Objective, measured_mask, report_objectives
from tuner.record import KIND, TRIAL_ID, is_candidate
from tuner.stats import (
    Change,
    accuracy_difference,
    hybrid_difference,
    median_interval,
    paired_ratio,
    seed_accuracy,
    wilson_interval,
)
from tuner.units import as_number

__all__ = [
    "ACCURACY_SEEDS",
    "accuracy_test",
    "candidate_mask",
    "decision_values",
    "throughput_ratio",
]

ACCURACY_SEEDS = "accuracy_seeds"  # how many seeds a trial's accuracy (and interval) rests on


def decision_values(
    trials: pd.DataFrame, remeasure: pd.DataFrame | None, seeds: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, bool]:
    """``trials`` with re-measured medians as ``images_per_second`` and the mean over seeds as
    ``val_accuracy`` where there are some (the search's kept as ``search_<name>``), each with
    its interval; True when any trial was re-measured."""
    frame = trials.copy()
    frame["search_images_per_second"] = frame["images_per_second"]
    frame["throughput_source"] = "search"
    for column in ("images_per_second_low", "images_per_second_high"):  # over its windows
        frame[column] = pd.to_numeric(frame.get(column), errors="coerce")
    remeasured = False
    for trial_id, est in _remeasured(remeasure).items():
        rows = frame[TRIAL_ID] == trial_id
        if not rows.any() or math.isnan(est.median):
            continue
        frame.loc[rows, "images_per_second"] = est.median
        frame.loc[rows, ["images_per_second_low", "images_per_second_high"]] = est.low, est.high
        frame.loc[rows, "throughput_source"] = "re-measured"
        remeasured = True
    _accuracy_values(frame, seeds)
    frame["candidate"] = candidate_mask(frame, report_objectives({}))
    return frame, remeasured


def _accuracy_values(frame: pd.DataFrame, seeds: pd.DataFrame | None) -> None:
    """Each trial's accuracy interval: Wilson's over its validation images, or, for a trial
    retrained with other seeds, :func:`tuner.stats.seed_accuracy` over its own run and those."""
    frame["search_val_accuracy"] = frame["val_accuracy"]
    intervals = [_accuracy_interval(row) for _, row in frame.iterrows()]
    frame["val_accuracy_low"] = [low for low, _ in intervals]
    frame["val_accuracy_high"] = [high for _, high in intervals]
    frame[ACCURACY_SEEDS] = 1
    for index, row in frame.iterrows():
        others = seed_accuracies(seeds, str(row[TRIAL_ID]))
        own, images = as_number(row.get("val_accuracy")), as_number(row.get("val_images"))
        if not others or math.isnan(own):
            continue
        est = seed_accuracy([own, *others], 0 if math.isnan(images) else int(images))
        frame.loc[index, ["val_accuracy", "val_accuracy_low", "val_accuracy_high"]] = (
            est.value,
            est.low,
            est.high,
        )
        frame.loc[index, ACCURACY_SEEDS] = est.seeds


def candidate_mask(trials: pd.DataFrame, objs: list[Objective]) -> pd.Series:
    """The trials that can be recommended: of kind ok, every objective measured."""
    kinds = trials[KIND].astype(object).map(lambda kind: is_candidate(str(kind)))
    return kinds.astype(bool) & measured_mask(trials, objs)


def _remeasured(remeasure: pd.DataFrame | None) -> dict[str, Any]:
    if remeasure is None or remeasure.empty or TRIAL_ID not in remeasure:
        return {}
    ok = remeasure[remeasure.get("status", "ok") == "ok"]
    return {
        str(tid): median_interval(group["images_per_second"].tolist())
        for tid, group in ok.groupby(TRIAL_ID, sort=False)
    }


def _accuracy_interval(row: Mapping[str, Any]) -> tuple[float, float]:
    acc, n = as_number(row.get("val_accuracy")), as_number(row.get("val_images"))
    if math.isnan(acc) or math.isnan(n) or n <= 0:
        return math.nan, math.nan
    return wilson_interval(round(acc * n), int(n))


def throughput_ratio(fast: pd.Series, slow: pd.Series, remeasure: pd.DataFrame | None) -> Change:
    """faster / slower from paired re-measurements (same repeat), else with no interval."""
    if remeasure is not None and not remeasure.empty and "repeat" in remeasure:
        a, b = paired(remeasure, fast[TRIAL_ID], slow[TRIAL_ID], by=TRIAL_ID)
        if len(a):
            return paired_ratio(b["images_per_second"].tolist(), a["images_per_second"].tolist())
    value = as_number(fast["images_per_second"]) / as_number(slow["images_per_second"])
    return Change(value, math.nan, math.nan, 1, 1.0)


def accuracy_test(a: Mapping[str, Any], b: Mapping[str, Any]) -> Change:
    """``a - b`` in accuracy with its interval: two single runs over the smaller validation set;
    where either rests on several seeds, Newcombe's hybrid of the two intervals."""
    if max(_seeds_of(a), _seeds_of(b)) < 2:
        images = min(as_number(a.get("val_images")), as_number(b.get("val_images")))
        accuracy = [as_number(row.get("val_accuracy")) for row in (b, a)]
        return accuracy_difference(accuracy[:1], accuracy[1:], [images])
    estimates = [tuple(as_number(row.get(k)) for k in _ACCURACY) for row in (b, a)]
    return hybrid_difference(*estimates, min(_seeds_of(a), _seeds_of(b)))  # type: ignore[arg-type]


_ACCURACY = ("val_accuracy", "val_accuracy_low", "val_accuracy_high")


def _seeds_of(row: Mapping[str, Any]) -> int:
    seeds = as_number(row.get(ACCURACY_SEEDS))
    return 1 if math.isnan(seeds) else int(seeds)
