"""The answer of a search (decided once, by the search or by ``tuner report`` on the folder): the
front on re-measured numbers, the picks, and what is a tie. When some candidates were
re-measured only they can be picked (the others' single figure was not taken side by side). Two
picks tie when their interval holds no change; picks not re-measured together have no
throughput interval: "not re-measured", never a tie.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from tuner.config import TrainConfig, trial_threads
from tuner.decision import accuracy_test, candidate_mask, decision_values, throughput_ratio
from tuner.measure import RESOLUTION
from tuner.objectives import (
    Objective,
    best_per_objective,
    measured_mask,
    pareto_front,
    rank_candidates,
    report_objectives,
)
from tuner.record import (
    KIND,
    STARVED_BY,
    TIME_TO_TARGET_EST_S,
    TRIAL_ID,
)
from tuner.spaces import train_config_of
from tuner.stats import Change
from tuner.time_to_target import (
    RulePick,
    Target,
    choose_by_time,
    derive_target,
    estimated_times,
    given_target,
    pick_sentence,
    points_text,
    rule_sentence,
    why_picked,
)
from tuner.units import as_number, interval_text, plural, ratio_text

if TYPE_CHECKING:
    from tuner.experiment import Experiment

TOO_NOISY = "Too noisy to decide on speed."  # the note's first sentence, bold in the report

__all__ = [
    "TOO_NOISY",
    "Answer",
    "Margin",
    "PairVerdict",
    "candidates",
    "decide",
    "margin_clause",
    "pairs_text",
    "points_text",
    "short_of_steps_text",
    "to_remeasure",
    "world_size_of",
]


@dataclass(frozen=True)
class PairVerdict:
    """How the two picks compare, objective by objective, within the noise."""

    faster: str
    slower: str
    throughput: Change  # faster / slower (no interval unless both were re-measured together)
    accuracy: Change  # faster minus slower

    @property
    def same_within_noise(self) -> bool:
        return self.throughput.verdict == "tie" and self.accuracy.tie


@dataclass(frozen=True)
class Margin:
    """The one pick best on both objectives against the next best candidate on one of them."""

    runner_up: str
    change: Change  # pick / runner-up throughput, or pick minus runner-up accuracy


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
    margins: dict[str, Margin] = field(default_factory=dict)  # one pick best on both: its leads
    resolution: float = RESOLUTION  # the re-measurement's aim: intervals within +- this
    data_parallel: bool = False  # a data-parallel search: no re-measurement to advise
    objective: str = "pareto"  # --objective: pareto recommends by time to target
    target: Target | None = None  # the accuracy every time to target is measured to
    rule: RulePick | None = None  # the rule's pick (None: no candidate reached the target)

    @property
    def by_time(self) -> bool:
        """Whether the recommendation is the rule's: the soonest to the target (pareto)."""
        return self.objective == "pareto" and self.rule is not None

    @property
    def recommended(self) -> pd.Series | None:
        """The one config the answer recommends: the rule's (soonest to the target); for one
        objective, or with none at the target, :attr:`front_pick`."""
        if not self.best:
            return None
        if self.by_time and self.rule is not None:
            return self.row(self.rule.pick)
        return self.front_pick

    @property
    def front_pick(self) -> pd.Series | None:
        """The pick the trade-off sentence names: the more accurate when the two run at the
        same speed within noise, else the fastest (also for a real trade-off)."""
        if not self.best:
            return None
        p = self.picks
        if p is not None and p.throughput.verdict == "tie" and p.accuracy.separated:
            return self.best["val_accuracy"]
        return self.best[self.objectives[0][0]]

    @property
    def best_on_both(self) -> bool:
        """One pick ahead of the next best candidate beyond noise on both objectives."""
        margins = self.margins.values()
        return self.picks is None and len(margins) == 2 and all(m.change.separated for m in margins)

    def row(self, trial_id: str) -> pd.Series:
        """A trial's row of the decision values."""
        return self.trials[self.trials[TRIAL_ID].astype(str) == trial_id].iloc[0]

    def lead(self) -> list[str]:
        """What the answer says first: the rule's pick and why, the rule, and the most accurate
        candidate against the pick ([] for one objective, or with nothing to pick)."""
        if self.objective != "pareto" or self.target is None or self.front.empty:
            return []
        if self.rule is None:
            return [
                rule_sentence(self.target),
                "No candidate reached the target, so the trade-off below decides.",
            ]
        rows = {str(r[TRIAL_ID]): r for _, r in self.trials.iterrows()}
        lines = [pick_sentence(self.rule, rows), rule_sentence(self.target)]
        off_front = not self.front[TRIAL_ID].astype(str).eq(self.rule.pick).any()
        note = (
            " It is not on the Pareto front below, which weighs each trial's final accuracy and"
            " images/s at the end of its budget, not how soon it reached the target."
            if off_front
            else ""
        )
        return [*lines, self.accuracy_against_pick() + note]

    def headline(self) -> str:
        """The answer in short: the rule's pick and the rule, or the trade-off sentence."""
        return " ".join(self.lead()[:2]) or self.sentence()

    def accuracy_lead(self) -> Margin | None:
        """The most accurate pick against the next most accurate candidate (None: alone)."""
        sharp = self.best.get("val_accuracy")
        if sharp is None:
            return None
        pool = _pool(self.trials, self.remeasured)
        others = pool[pool[TRIAL_ID] != sharp[TRIAL_ID]].dropna(subset=["val_accuracy"])
        if others.empty:
            return None
        runner = others.sort_values("val_accuracy", ascending=False).iloc[0]
        return Margin(str(runner[TRIAL_ID]), accuracy_test(sharp, runner))

    def accuracy_against_pick(self) -> str:
        """The most accurate candidate against the rule's pick, by the one rule."""
        sharp, rule = self.best.get("val_accuracy"), self.rule
        if sharp is None or rule is None or str(sharp[TRIAL_ID]) == rule.pick:
            return against_pick_text(None)
        change = accuracy_test(sharp, self.row(rule.pick))
        return against_pick_text((str(sharp[TRIAL_ID]), rule.pick), change, why_picked(rule))

    def noise_note(self) -> str:
        """Said before the pick when the re-measurement could not decide on speed: its interval
        says nothing, or is a tie wider than it aimed at ("" otherwise)."""
        margin = self.margins.get("images_per_second")
        change = self.picks.throughput if self.picks else margin.change if margin else None
        if change is None or change.verdict in ("none", "separated"):
            return ""
        reach = change.half_width
        if change.informative and reach <= self.resolution:
            return ""  # a tie as narrow as aimed at: the speeds are the same, decided
        said = (
            "says nothing"
            if not change.informative
            else f"cannot tell apart speeds less than {reach:.0%} apart"
        )
        return (
            f"{TOO_NOISY} The re-measurement of the picks gave "
            f"{ratio_text(change.value, change.low, change.high)} over {pairs_text(change.n)}:"
            f" its interval reaches +-{reach:.0%} where +-{self.resolution:.0%} was the aim, so "
            f"it {said}. Decide again on a quiet machine (nothing else running), or give the "
            "re-measurement more rounds and time (--remeasure-max-repeats, --trust-budget)."
        )

    @property
    def candidates(self) -> int:
        """How many trials can be recommended (ran ok to their end)."""
        if self.trials.empty or "candidate" not in self.trials:
            return 0
        return int(self.trials["candidate"].sum())

    def _kinds_text(self) -> str:
        """What the trials were instead, by kind (" (2 errored, 1 over budget)"; "": none)."""
        if self.trials.empty or KIND not in self.trials:
            return ""
        counts = self.trials[KIND].astype(str).value_counts()
        return " (" + ", ".join(f"{n} {kind}" for kind, n in counts.items()) + ")"

    def sentence(self) -> str:
        """One sentence: do the picks differ beyond the noise, and what follows from it."""
        if self.front.empty:
            return f"No trial can be recommended: none ran ok to its end{self._kinds_text()}."
        if self.picks is None:
            row = self.front_pick
            pick = self.front.iloc[0][TRIAL_ID] if row is None else row[TRIAL_ID]
            return one_pick_sentence(str(pick), self.margins, self.candidates)
        return picks_sentence(self.picks, by_time=self.by_time, data_parallel=self.data_parallel)


def picks_sentence(p: PairVerdict, *, by_time: bool, data_parallel: bool) -> str:
    """The fastest pick against the most accurate one, in what their intervals allow."""
    is_pick = (
        "leads the front (at the end of each trial's budget; the rule's pick is above)"
        if by_time
        else "is the pick"
    )  # where the rule picks by time to target, the front's better end is only the front's
    fast, slow = f"the fastest ({p.faster})", f"the most accurate ({p.slower})"
    speed = f"throughput {ratio_text(p.throughput.value, p.throughput.low, p.throughput.high)}"
    points = points_text(p.accuracy)
    verdict = p.throughput.verdict
    if verdict == "none":  # no verdict without evidence
        return (
            f"{fast.capitalize()} and {slow} were not re-measured side by side: their "
            f"throughputs are {p.throughput.value:.2f}x apart as measured in the search, with "
            f"no interval, so no verdict on speed; {_accuracy_clause(p.accuracy, slow)}. "
            f"The fastest is shown first; {_to_tell_apart(data_parallel)}."
        )
    if verdict == "uninformative":
        return (
            f"{fast.capitalize()} and {slow} were re-measured side by side, but their "
            f"{speed} over {pairs_text(p.throughput.n)} says nothing, so no verdict on "
            f"speed; {_accuracy_clause(p.accuracy, slow)}. The fastest as measured is shown "
            "first."
        )
    if p.same_within_noise:
        return (
            f"{fast.capitalize()} and {slow} are the same within noise ({speed}, "
            f"{points} apart, inside the interval): either will do."
        )
    if verdict == "tie" and p.accuracy.separated:
        return (
            f"{fast.capitalize()} and {slow} run at the same speed within noise ({speed}),"
            f" so {slow} {is_pick}: {points} more accurate, beyond noise."
        )
    if verdict == "tie":
        return (
            f"{fast.capitalize()} and {slow} run at the same speed within noise ({speed}); "
            f"{_accuracy_clause(p.accuracy, slow)}: no verdict, the fastest is shown first."
        )
    if p.accuracy.tie:
        return (
            f"{fast.capitalize()} and {slow} are equally accurate within noise ({points} "
            f"apart), so {fast} {is_pick}: {speed}, beyond noise."
        )
    if not p.accuracy.has_interval:
        return (
            f"{fast.capitalize()} is faster beyond noise ({speed}); {slow} is {points} "
            "more accurate, with no interval (validation images unknown), so no verdict "
            f"on accuracy: the fastest {is_pick}."
        )
    return (
        f"A real trade-off: {fast} is faster beyond noise ({speed}) and {slow} is "
        f"{points} more accurate beyond noise; pick by what matters more to you."
    )


def _to_tell_apart(data_parallel: bool) -> str:
    if data_parallel:  # the re-measurement measures one process: skipped
        return (
            "a data-parallel search is not re-measured, so train both on their workers to "
            "tell them apart"
        )
    return "re-measure both (--remeasure-top 2 or more) to tell them apart"


def one_pick_sentence(pick: str, margins: Mapping[str, Margin], candidates: int) -> str:
    """One trial best on both as measured: beyond noise on both, or the ties named."""
    if not margins:
        if candidates > 1:  # one objective: no runner-up measured beside it
            return (
                f"One configuration ({pick}) is the best of {candidates} on the "
                "search's objective as measured, with no interval against the next: no "
                "verdict beyond that."
            )
        return (
            f"One configuration ({pick}) is the only one that can be picked, so nothing was "
            "compared with it."
        )
    clauses = "; ".join(margin_clause(m, margin) for m, margin in margins.items())
    if len(margins) == 2 and all(m.change.separated for m in margins.values()):
        return (
            f"One configuration ({pick}) is the best on both throughput and accuracy, "
            f"beyond noise: {clauses}."
        )
    return (
        f"One configuration ({pick}) leads on both throughput and accuracy as measured, "
        f"but not beyond noise on both: {clauses}."
    )


def against_pick_text(
    trials: tuple[str, ...] | None, change: Change | None = None, why: str = ""
) -> str:
    """The most accurate candidate (``trials[0]``) against the rule's pick (``trials[1]``):
    ``change`` is the first minus the pick in accuracy; ``why`` what made the rule's pick."""
    if trials is None or change is None:
        return "The pick is also the most accurate candidate as measured."
    other, pick = f"`{trials[0]}`", trials[1]
    points = points_text(change)
    if change.separated:
        return (
            f"{other} is {points} more accurate at its end, beyond noise; the rule still "
            f"picks `{pick}` because {why} (the target is what the rule asks for): for the "
            f"highest final accuracy, train {other} (recommended_val_accuracy.json)."
        )
    return f"{other} ended {points} apart from the pick in accuracy: within noise."


def margin_clause(metric: str, margin: Margin) -> str:
    """The one pick against the runner-up on ``metric``, with what its interval allows."""
    c, other = margin.change, margin.runner_up
    if metric == "images_per_second":
        speed = ratio_text(c.value, c.low, c.high)
        return {
            "separated": f"faster than the next fastest ({other}) beyond noise, {speed}",
            "tie": f"as fast as {other} within noise, {speed}: a tie on speed",
            "uninformative": f"{c.value:.2f}x the speed of {other}, but its interval "
            f"{interval_text(c.low, c.high)} over {pairs_text(c.n)} says nothing: "
            "no verdict on speed",
            "none": f"{c.value:.2f}x the speed of {other} as measured in the search, with no "
            "interval (not re-measured side by side): no verdict on speed",
        }[c.verdict]
    points = points_text(c)
    if c.separated:
        return f"{points} more accurate than the next most accurate ({other}), beyond noise"
    if c.tie:
        return f"as accurate as {other} within noise ({points} apart): a tie on accuracy"
    return f"{points} more accurate than {other}, with no interval: no verdict on accuracy"


def starved_text(trials: pd.DataFrame) -> str | None:
    """``2 trials were starved (1 by machine load, 1 by budget): ...``, or None without any."""
    kinds = trials.get(KIND, pd.Series(dtype=str))
    starved = trials[kinds == "starved"]
    if starved.empty:
        return None
    were = "trials were" if len(starved) > 1 else "trial was"
    return (
        f"{len(starved)} {were} starved ({_by_cause(starved)}): ended by the time budget before "
        "training the images of every other trial, so not used in the answer. Raise the "
        "workload's time budget (--time-budget-s), or run on a quieter machine."
    )


def short_of_steps_text(trials: pd.DataFrame) -> str | None:
    """The trials of another kind cut short of their planned steps too (a ``starved_by``), each
    with its kind and cause, or None without any."""
    short = trials[trials.get(KIND, pd.Series(dtype=str)) != "starved"]
    if short.empty:
        return None
    causes = short.get(STARVED_BY, pd.Series("", index=short.index)).fillna("").astype(str)
    cut = [_cut_by(c) for c in causes]
    if len(short) == 1:
        trial, kind = short[TRIAL_ID].iloc[0], short[KIND].iloc[0]
        return (
            f"Trial `{trial}` was cut short of its planned steps {cut[0]}; it counts as {kind}, "
            "not as starved."
        )
    named = ", ".join(
        f"`{t}` ({k}, {c})" for t, k, c in zip(short[TRIAL_ID], short[KIND], cut, strict=True)
    )
    return f"Trials {named} were cut short of their planned steps; each counts as its kind."


def _cut_by(cause: str) -> str:
    """``by machine load``: a ``starved_by`` without its figures (trials.csv holds them)."""
    named = re.sub(r" \(.*\)$", "", cause)
    return f"by {named}" if named and named != "unknown" else "of unknown cause"


def _by_cause(trials: pd.DataFrame) -> str:
    """``1 by machine load, 1 by budget``: the trials counted by their ``starved_by``."""
    causes = trials.get(STARVED_BY, pd.Series("", index=trials.index)).fillna("").astype(str)
    return ", ".join(f"{n} {cut}" for cut, n in causes.map(_cut_by).value_counts().items())


def world_size_of(row: Mapping[str, Any]) -> int:
    """The data-parallel workers a trial ran on, as its run reported (1: one process)."""
    workers = as_number(row.get("world_size"))
    return int(workers) if math.isfinite(workers) and workers > 1 else 1


def pairs_text(n: int) -> str:
    """``1 pair``, ``3 pairs``: how many pairs an interval is from."""
    return plural(n, "pair")


def _accuracy_clause(accuracy: Change, slow: str) -> str:
    points = points_text(accuracy)
    if accuracy.separated:
        return f"{slow} is {points} more accurate, beyond noise"
    if accuracy.tie:
        return f"their accuracies are {points} apart, inside the noise"
    return f"their accuracies are {points} apart, with no interval"


def decide(experiment: Experiment) -> Answer:
    """The answer for a loaded experiment: its front, its picks, and the picks' run configs."""
    objs = report_objectives(experiment.metadata)
    trials, remeasured = decision_values(experiment.trials, experiment.remeasure, experiment.seeds)
    pool = _pool(trials, remeasured)
    target = derive_target(pool, given_target(experiment.metadata))
    trials = estimated_times(trials, experiment.curves, target)
    pool = _pool(trials, remeasured)
    best = best_per_objective(pool, objs)
    picks = _picks(best, experiment.remeasure)
    rule = _rule(pool, experiment.remeasure)
    chosen = [str(row[TRIAL_ID]) for row in best.values()] + ([rule.pick] if rule else [])
    configs = {trial_id: pick_config(experiment, trial_id) for trial_id in chosen}
    margins = _margins(best, pool[measured_mask(pool, objs)], experiment.remeasure)
    aim = (experiment.metadata.get("remeasure") or {}).get("resolution")
    resolution = float(aim) if isinstance(aim, int | float) else RESOLUTION
    front = pareto_front(pool, objs)
    parallel = any(world_size_of(row) > 1 for _, row in trials.iterrows())
    objective = str(experiment.metadata.get("objective") or "pareto")
    return Answer(
        objs, trials, front, best, remeasured, picks, configs, margins, resolution, parallel,
        objective, target, rule,
    )  # fmt: skip


def _pool(trials: pd.DataFrame, remeasured: bool) -> pd.DataFrame:
    """The candidates that can be picked: only re-measured ones where there are some."""
    pool = trials[trials["candidate"]]
    return pool[pool["throughput_source"] == "re-measured"] if remeasured else pool


def _rule(pool: pd.DataFrame, remeasure: pd.DataFrame | None) -> RulePick | None:
    rows = {str(row[TRIAL_ID]): row for _, row in pool.iterrows()}
    return choose_by_time(pool, lambda a, b: throughput_ratio(rows[a], rows[b], remeasure))


def to_remeasure(experiment: Experiment, *, top: int) -> tuple[pd.DataFrame, str]:
    """The candidates to re-measure, and a line when they are more than ``top``: both ends of
    the front, the soonest to the target and the least memory of those that reached it (the
    rule's pick when times tie), then by non-dominated rank and time to target up to ``top``."""
    objs = report_objectives(experiment.metadata)
    trials, _ = decision_values(experiment.trials, None)
    pool = _pool(trials, False)
    target = derive_target(pool, given_target(experiment.metadata))
    pool = estimated_times(pool[measured_mask(pool, objs)], experiment.curves, target)
    if pool.empty or top <= 0:
        return pool.head(0), ""
    must = [str(row[TRIAL_ID]) for row in best_per_objective(pool, objs).values()]
    reached = pool.dropna(subset=[TIME_TO_TARGET_EST_S])
    if not reached.empty:
        must.append(str(reached.sort_values(TIME_TO_TARGET_EST_S).iloc[0][TRIAL_ID]))
        memory = reached.sort_values(["peak_memory_bytes", TIME_TO_TARGET_EST_S])
        must.append(str(memory.iloc[0][TRIAL_ID]))
    must = list(dict.fromkeys(must))
    ranked = rank_candidates(pool, objs, top=len(pool), then=TIME_TO_TARGET_EST_S)
    rest = [t for t in ranked[TRIAL_ID].astype(str) if t not in must]
    chosen = must + rest[: max(0, top - len(must))]
    note = (
        f"Re-measuring {len(must)} candidates, more than --remeasure-top {top}: both ends of the "
        "front and the soonest to the target (and the least memory of those that reached it) "
        "are always re-measured."
        if len(must) > top
        else ""
    )
    rows = pool.set_index(pool[TRIAL_ID].astype(str)).loc[chosen]
    return rows.reset_index(drop=True), note


def candidates(trials: pd.DataFrame, objs: list[Objective]) -> pd.DataFrame:
    """The trials that can be recommended: of kind ok, every objective measured."""
    return trials[candidate_mask(trials, objs)]


def pick_config(experiment: Experiment, trial_id: str) -> TrainConfig:
    """A trial's full run config (``tuner train --config``), on the torch threads it measured
    with (its CPU share's, unless its config sets them)."""
    workload = experiment.metadata.get("workload")
    config = train_config_of(
        experiment.configs.get(trial_id, {}),
        workload=workload if isinstance(workload, Mapping) else None,
        search_only=experiment.metadata.get("search_only_params") or (),
    )
    share = experiment.metadata.get("resources_per_trial")
    if config.torch_threads is not None or not isinstance(share, Mapping):
        return config
    cpus, gpus = share.get("cpu"), share.get("gpu") or 0
    if not isinstance(cpus, int | float) or not isinstance(gpus, int | float):
        return config
    return config.replace(torch_threads=trial_threads(cpus, gpus))


def _picks(best: dict[str, pd.Series], remeasure: pd.DataFrame | None) -> PairVerdict | None:
    """The fastest pick against the most accurate one, when they are two trials."""
    fast, accurate = best.get("images_per_second"), best.get("val_accuracy")
    if fast is None or accurate is None or fast[TRIAL_ID] == accurate[TRIAL_ID]:
        return None
    ratio = throughput_ratio(fast, accurate, remeasure)
    return PairVerdict(
        str(fast[TRIAL_ID]), str(accurate[TRIAL_ID]), ratio, accuracy_test(fast, accurate)
    )


def _margins(
    best: dict[str, pd.Series], pool: pd.DataFrame, remeasure: pd.DataFrame | None
) -> dict[str, Margin]:
    """The one pick best on both against the next fastest and the next most accurate."""
    fast, accurate = best.get("images_per_second"), best.get("val_accuracy")
    if fast is None or accurate is None or fast[TRIAL_ID] != accurate[TRIAL_ID]:
        return {}
    others = pool[pool[TRIAL_ID] != fast[TRIAL_ID]]
    if others.empty:
        return {}
    quick = others.sort_values("images_per_second", ascending=False).iloc[0]
    sharp = others.sort_values("val_accuracy", ascending=False).iloc[0]
    return {
        "images_per_second": Margin(str(quick[TRIAL_ID]), throughput_ratio(fast, quick, remeasure)),
        "val_accuracy": Margin(str(sharp[TRIAL_ID]), accuracy_test(fast, sharp)),
    }
