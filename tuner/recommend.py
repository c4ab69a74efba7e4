"""The answer of a search: the front on re-measured numbers, the picks, and what is a tie.

The console summary of ``tuner search`` and the report both call :func:`decide` on the same
experiment folder, so they state the same front and the same picks.

- Throughput: a trial that was re-measured after the search (interleaved, fresh builds) is
  judged by the median of its re-measurements, with that median's interval; the others keep
  their in-search figure with the interval over its measurement windows. When candidates were
  re-measured, only they can be picked: the others' single figure was taken side by side.
- Accuracy: the trial's last validation accuracy with its Wilson interval from the number of
  validation images.
- Two picks are a **tie** on throughput when the paired ratio of their re-measurements has an
  interval containing 1x, and on accuracy when a two-proportion test cannot separate them
  (unpooled, which is conservative for two models scored on the same images).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tuner.compare import paired
from tuner.objectives import (
    Objective,
    best_per_objective,
    candidate_mask,
    pareto_front,
    report_objectives,
)
from tuner.stats import (
    Change,
    accuracy_difference,
    median_interval,
    paired_ratio,
    wilson_interval,
)
from tuner.units import ratio_text

__all__ = ["Answer", "PairVerdict", "decide"]


@dataclass(frozen=True)
class PairVerdict:
    """How two front trials compare, objective by objective, within the noise."""

    faster: str
    slower: str
    throughput: Change  # faster / slower
    accuracy_difference: float  # faster minus slower
    accuracy_tie: bool

    @property
    def same_within_noise(self) -> bool:
        return self.throughput.tie and self.accuracy_tie


@dataclass(frozen=True)
class Answer:
    """What to do, decided from one experiment folder."""

    objectives: list[Objective]
    trials: pd.DataFrame  # every trial, with the decision values and their intervals
    front: pd.DataFrame  # Pareto-optimal picks on the decision values
    best: dict[str, pd.Series]  # objective metric -> the pick that is best on it
    remeasured: bool  # whether throughput comes from re-measurement
    pairs: list[PairVerdict] = field(default_factory=list)  # adjacent front trials compared

    picks: PairVerdict | None = None  # the fastest pick vs the most accurate one

    @property
    def ties(self) -> list[PairVerdict]:
        return [p for p in self.pairs if p.throughput.tie]

    @property
    def recommended(self) -> pd.Series | None:
        """The one config the sentence recommends: the more accurate pick when the two run at
        the same speed within noise, else the fastest (also for a real trade-off)."""
        if not self.best:
            return None
        first = self.best[self.objectives[0][0]]
        p = self.picks
        if p is not None and p.throughput.tie and not p.accuracy_tie:
            return self.best["val_accuracy"]
        return first

    def sentence(self) -> str:
        """One sentence: do the picks differ beyond the noise, and what follows from it."""
        if self.front.empty:
            return "No trial can be recommended: none finished ok within the memory budget."
        if self.picks is None:
            return (f"One configuration ({self.front.iloc[0]['trial_id']}) is the best on both "
                    "throughput and accuracy.")  # fmt: skip
        p = self.picks
        fast, slow = f"the fastest ({p.faster})", f"the most accurate ({p.slower})"
        speed = f"throughput {_ratio(p.throughput)}"
        points = f"{100 * abs(p.accuracy_difference):.1f} accuracy points"
        if p.same_within_noise:
            return (f"{fast.capitalize()} and {slow} are the same within noise ({speed}, "
                    f"{points} apart, inside the interval): either will do.")  # fmt: skip
        if p.throughput.tie:
            return (f"{fast.capitalize()} and {slow} run at the same speed within noise ({speed}),"
                    f" so {slow} is the pick: {points} more accurate, beyond noise.")  # fmt: skip
        if p.accuracy_tie:
            return (f"{fast.capitalize()} and {slow} are equally accurate within noise ({points} "
                    f"apart), so {fast} is the pick: {speed}, beyond noise.")  # fmt: skip
        return (
            f"A real trade-off: {fast} is faster beyond noise ({speed}) and {slow} is "
            f"{points} more accurate beyond noise; pick by what matters more to you."
        )


def decide(experiment: Any) -> Answer:
    """The answer for a loaded experiment (:class:`tuner.results.Experiment`)."""
    objs = report_objectives(experiment.metadata)
    trials, remeasured = decision_values(experiment.trials, experiment.remeasure)
    pool = trials
    if remeasured:
        pool = trials[trials["throughput_source"] == "re-measured"]
    front = pareto_front(pool, objs)
    pairs = _pairs(front, experiment.remeasure) if len(front) > 1 else []
    best = best_per_objective(pool, objs)
    return Answer(objs, trials, front, best, remeasured, pairs, _picks(best, experiment.remeasure))


def _picks(best: dict[str, pd.Series], remeasure: pd.DataFrame | None) -> PairVerdict | None:
    """The fastest pick against the most accurate one, when they are two trials."""
    fast, accurate = best.get("images_per_second"), best.get("val_accuracy")
    if fast is None or accurate is None or fast["trial_id"] == accurate["trial_id"]:
        return None
    diff, tie = _accuracy_test(fast, accurate)
    ratio = _throughput_ratio(fast, accurate, remeasure)
    return PairVerdict(str(fast["trial_id"]), str(accurate["trial_id"]), ratio, diff, tie)


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
        rows = frame["trial_id"] == trial_id
        if not rows.any() or math.isnan(est.median):
            continue
        frame.loc[rows, "images_per_second"] = est.median
        frame.loc[rows, ["images_per_second_low", "images_per_second_high"]] = est.low, est.high
        frame.loc[rows, "throughput_source"] = "re-measured"
        remeasured = True
    acc_low, acc_high = (
        zip(*(_accuracy_interval(r) for _, r in frame.iterrows()), strict=True)
        if len(frame)
        else ((), ())
    )
    frame["val_accuracy_low"], frame["val_accuracy_high"] = list(acc_low), list(acc_high)
    frame["candidate"] = candidate_mask(frame, report_objectives({}))
    return frame, remeasured


def _remeasured(remeasure: pd.DataFrame | None) -> dict[str, Any]:
    if remeasure is None or remeasure.empty or "trial_id" not in remeasure:
        return {}
    ok = remeasure[remeasure.get("status", "ok") == "ok"]
    return {
        str(tid): median_interval(group["images_per_second"].tolist())
        for tid, group in ok.groupby("trial_id", sort=False)
    }


def _accuracy_interval(row: Mapping[str, Any]) -> tuple[float, float]:
    acc, n = _num(row.get("val_accuracy")), _num(row.get("val_images"))
    if math.isnan(acc) or math.isnan(n) or n <= 0:
        return math.nan, math.nan
    return wilson_interval(round(acc * n), int(n))


def _pairs(front: pd.DataFrame, remeasure: pd.DataFrame | None) -> list[PairVerdict]:
    ordered = front.sort_values("images_per_second", ascending=False)
    verdicts = []
    for (_, fast), (_, slow) in itertools.pairwise(ordered.iterrows()):
        ratio = _throughput_ratio(fast, slow, remeasure)
        diff, tie = _accuracy_test(fast, slow)
        verdicts.append(PairVerdict(str(fast["trial_id"]), str(slow["trial_id"]), ratio, diff, tie))
    return verdicts


def _throughput_ratio(fast: pd.Series, slow: pd.Series, remeasure: pd.DataFrame | None) -> Change:
    """faster / slower from paired re-measurements (same repeat), else with no interval."""
    if remeasure is not None and not remeasure.empty and "repeat" in remeasure:
        a, b = paired(remeasure, fast["trial_id"], slow["trial_id"], by="trial_id")
        if len(a):
            return paired_ratio(b["images_per_second"].tolist(), a["images_per_second"].tolist())
    value = _num(fast["images_per_second"]) / _num(slow["images_per_second"])
    return Change(value, math.nan, math.nan, 1, 1.0)


def _accuracy_test(a: pd.Series, b: pd.Series) -> tuple[float, bool]:
    pa, pb = _num(a.get("val_accuracy")), _num(b.get("val_accuracy"))
    images = [_num(a.get("val_images")), _num(b.get("val_images"))]
    return pa - pb, accuracy_difference([pb], [pa], images=images).tie


def _ratio(change: Change) -> str:
    return ratio_text(change.value, change.low, change.high)


def _num(value: Any) -> float:
    try:
        return math.nan if value is None or value is pd.NA else float(value)
    except (TypeError, ValueError):
        return math.nan
