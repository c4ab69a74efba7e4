"""The answer of a search: the front on re-measured numbers, the picks, and what is a tie.

``tuner search`` decides once and hands the :class:`Answer` to its summary and its report;
``tuner report`` decides on the folder it reads: both state the same front and the same picks.
Candidates are the trials of kind ok that measured every objective. A re-measured trial's
throughput is the median of its re-measurements, and when there are some only re-measured
candidates can be picked (the others' single figure was not taken side by side); accuracy
carries its Wilson interval over the validation images. Two picks tie on throughput when the
paired ratio of their re-measurements holds 1x, and on accuracy when
:func:`tuner.stats.accuracy_difference` holds 0; picks not re-measured together have no
throughput interval: "not re-measured", never a tie.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from tuner.compare import paired
from tuner.config import TrainConfig
from tuner.objectives import (
    Objective,
    best_per_objective,
    measured_mask,
    pareto_front,
    report_objectives,
)
from tuner.record import KIND, TRIAL_ID, is_candidate
from tuner.spaces import train_config_of
from tuner.stats import Change, accuracy_difference, median_interval, paired_ratio, wilson_interval
from tuner.units import as_number, ratio_text

if TYPE_CHECKING:
    from tuner.experiment import Experiment

__all__ = ["Answer", "PairVerdict", "candidates", "decide"]


@dataclass(frozen=True)
class PairVerdict:
    """How the two picks compare, objective by objective, within the noise."""

    faster: str
    slower: str
    throughput: Change  # faster / slower (no interval unless both were re-measured together)
    accuracy: Change  # faster minus slower

    @property
    def same_within_noise(self) -> bool:
        return self.throughput.tie and self.accuracy.tie


@dataclass(frozen=True)
class Answer:
    """What to do, decided from one experiment folder."""

    objectives: list[Objective]
    trials: pd.DataFrame  # every trial, with the decision values and their intervals
    front: pd.DataFrame  # Pareto-optimal picks on the decision values
    best: dict[str, pd.Series]  # objective metric -> the pick that is best on it
    remeasured: bool  # whether throughput comes from re-measurement
    picks: PairVerdict | None = None  # the fastest pick vs the most accurate one
    configs: dict[str, TrainConfig] = field(default_factory=dict)  # pick's trial_id -> its run

    @property
    def recommended(self) -> pd.Series | None:
        """The one config the sentence recommends: the more accurate pick when the two run at
        the same speed within noise, else the fastest (also for a real trade-off)."""
        if not self.best:
            return None
        p = self.picks
        if p is not None and p.throughput.tie and p.accuracy.separated:
            return self.best["val_accuracy"]
        return self.best[self.objectives[0][0]]

    def sentence(self) -> str:
        """One sentence: do the picks differ beyond the noise, and what follows from it."""
        if self.front.empty:
            return "No trial can be recommended: none finished ok within the memory budget."
        if self.picks is None:
            return (
                f"One configuration ({self.front.iloc[0][TRIAL_ID]}) is the best on both "
                "throughput and accuracy."
            )
        p = self.picks
        fast, slow = f"the fastest ({p.faster})", f"the most accurate ({p.slower})"
        speed = f"throughput {ratio_text(p.throughput.value, p.throughput.low, p.throughput.high)}"
        points = f"{100 * abs(p.accuracy.value):.1f} accuracy points"
        if not p.throughput.has_interval:  # no verdict without evidence
            return (
                f"{fast.capitalize()} and {slow} were not re-measured side by side: their "
                f"throughputs are {p.throughput.value:.2f}x apart as measured in the search, with "
                f"no interval, so no verdict on speed; {_accuracy_clause(p.accuracy, slow)}. "
                f"The fastest is shown first; re-measure both (--remeasure-top 2 or more) to "
                "tell them apart."
            )
        if p.same_within_noise:
            return (
                f"{fast.capitalize()} and {slow} are the same within noise ({speed}, "
                f"{points} apart, inside the interval): either will do."
            )
        if p.throughput.tie and p.accuracy.separated:
            return (
                f"{fast.capitalize()} and {slow} run at the same speed within noise ({speed}),"
                f" so {slow} is the pick: {points} more accurate, beyond noise."
            )
        if p.accuracy.tie:
            return (
                f"{fast.capitalize()} and {slow} are equally accurate within noise ({points} "
                f"apart), so {fast} is the pick: {speed}, beyond noise."
            )
        if not p.accuracy.has_interval:
            return (
                f"{fast.capitalize()} is faster beyond noise ({speed}); {slow} is {points} "
                "more accurate, with no interval (validation images unknown), so no verdict "
                "on accuracy: the fastest is the pick."
            )
        return (
            f"A real trade-off: {fast} is faster beyond noise ({speed}) and {slow} is "
            f"{points} more accurate beyond noise; pick by what matters more to you."
        )


def _accuracy_clause(accuracy: Change, slow: str) -> str:
    points = f"{100 * abs(accuracy.value):.1f} accuracy points"
    if accuracy.separated:
        return f"{slow} is {points} more accurate, beyond noise"
    if accuracy.tie:
        return f"their accuracies are {points} apart, inside the noise"
    return f"their accuracies are {points} apart, with no interval"


def decide(experiment: Experiment) -> Answer:
    """The answer for a loaded experiment: its front, its picks, and the picks' run configs.

    Raises:
        TunerError: a pick's stored settings no longer make a valid run config.
    """
    objs = report_objectives(experiment.metadata)
    trials, remeasured = decision_values(experiment.trials, experiment.remeasure)
    pool = trials[trials["candidate"]]
    if remeasured:
        pool = pool[pool["throughput_source"] == "re-measured"]
    best = best_per_objective(pool, objs)
    picks = _picks(best, experiment.remeasure)
    configs = {
        str(row[TRIAL_ID]): pick_config(experiment, str(row[TRIAL_ID])) for row in best.values()
    }
    return Answer(objs, trials, pareto_front(pool, objs), best, remeasured, picks, configs)


def candidates(trials: pd.DataFrame, objs: list[Objective]) -> pd.DataFrame:
    """The trials that can be recommended: of kind ok, every objective measured."""
    return trials[_candidate_mask(trials, objs)]


def pick_config(experiment: Experiment, trial_id: str) -> TrainConfig:
    """The full run config of a trial: what ``tuner train --config`` re-runs."""
    workload = experiment.metadata.get("workload")
    return train_config_of(
        experiment.configs.get(trial_id, {}),
        workload=workload if isinstance(workload, Mapping) else None,
        search_only=experiment.metadata.get("search_only_params") or (),
    )


def _candidate_mask(trials: pd.DataFrame, objs: list[Objective]) -> pd.Series:
    kinds = trials[KIND].astype(object).map(lambda kind: is_candidate(str(kind)))
    return kinds.astype(bool) & measured_mask(trials, objs)


def _picks(best: dict[str, pd.Series], remeasure: pd.DataFrame | None) -> PairVerdict | None:
    """The fastest pick against the most accurate one, when they are two trials."""
    fast, accurate = best.get("images_per_second"), best.get("val_accuracy")
    if fast is None or accurate is None or fast[TRIAL_ID] == accurate[TRIAL_ID]:
        return None
    ratio = _throughput_ratio(fast, accurate, remeasure)
    return PairVerdict(
        str(fast[TRIAL_ID]), str(accurate[TRIAL_ID]), ratio, _accuracy_test(fast, accurate)
    )


def decision_values(
    trials: pd.DataFrame, remeasure: pd.DataFrame | None
) -> tuple[pd.DataFrame, bool]:
    """``trials`` with re-measured medians as ``images_per_second`` where there are some, the
    in-search figure kept as ``search_images_per_second``, and intervals for both objectives."""
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
    intervals = [_accuracy_interval(row) for _, row in frame.iterrows()]
    frame["val_accuracy_low"] = [low for low, _ in intervals]
    frame["val_accuracy_high"] = [high for _, high in intervals]
    frame["candidate"] = _candidate_mask(frame, report_objectives({}))
    return frame, remeasured


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


def _throughput_ratio(fast: pd.Series, slow: pd.Series, remeasure: pd.DataFrame | None) -> Change:
    """faster / slower from paired re-measurements (same repeat), else with no interval."""
    if remeasure is not None and not remeasure.empty and "repeat" in remeasure:
        a, b = paired(remeasure, fast[TRIAL_ID], slow[TRIAL_ID], by=TRIAL_ID)
        if len(a):
            return paired_ratio(b["images_per_second"].tolist(), a["images_per_second"].tolist())
    value = as_number(fast["images_per_second"]) / as_number(slow["images_per_second"])
    return Change(value, math.nan, math.nan, 1, 1.0)


def _accuracy_test(a: pd.Series, b: pd.Series) -> Change:
    """``a - b`` in accuracy with its interval (:func:`accuracy_difference` on the two trials'
    single measurements, over the smaller validation set)."""
    images = min(as_number(a.get("val_images")), as_number(b.get("val_images")))
    accuracy = [as_number(row.get("val_accuracy")) for row in (b, a)]
    return accuracy_difference(accuracy[:1], accuracy[1:], [images])
