"""Designs replayed and not kept (bench/README's list), so their figures can be checked.

Each variant changes one thing in ``search_replay``'s ``new`` design and is replayed on the
tuning seeds 0-19 (not the held-out ones: none of them was adopted):

- ``lazy``: a key's speed probes run only once one of its trials passes the first rung; until
  then the trial trains on the plain setting (or the knob that makes it fit), and it continues
  on the chosen setting after the probes (``--optimistic``: an unprobed trial meets the rung
  with its throughput scaled by the best speed-up seen so far);
- ``one-round``: one probe round instead of two (the combination check keeps its two pairs);
- ``dedup``: a config already trained to the end is not trained again; the study is told its
  values (Optuna's FAQ workaround). The grid's lr has three values, the real spaces' lr is
  continuous, so this measures the grid more than the tool.

    .venv/bin/python bench/search_replay_variants.py --grid resnet --variants lazy new
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_replay as R  # a script beside this one, not a package

from tuner.halving import ParetoHalving
from tuner.search.design import startup_design
from tuner.search.plan import SpaceProfile
from tuner.search.samplers import make_sampler

NEW = R.Strategy("new", joint=False, design=True, halving=True)


def _study(grid: R.Grid, seed: int, max_trials: int) -> tuple[optuna.Study, dict[str, list]]:
    """The new design's study: training-knob TPE with the start-up design enqueued."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    sampler = make_sampler("tpe", seed=seed, budget=max_trials, concurrency=1, grid=None)
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    space = R._space(grid, joint=False)
    profile = SpaceProfile([], {k: list(v) for k, v in space.items()}, set(), set(space))
    for row in startup_design(profile, budget=max_trials, seed=seed):
        study.enqueue_trial(row)
    return study, space


def replay_lazy(
    grid: R.Grid, seed: int, budget_s: float, max_trials: int, optimistic: bool = False
) -> R.Ledger:
    study, space = _study(grid, seed, max_trials)
    evaluations = len(next(iter(grid.training.values()))["curve"])
    halving = ParetoHalving.for_trials_of(["max", "max"], evaluations)
    ledger, bases, chosen, speedups = R.Ledger(grid), {}, {}, []
    for number in range(max_trials):
        if ledger.spent >= budget_s:
            break
        trial = study.ask()
        params = {n: trial.suggest_categorical(n, c) for n, c in space.items()}
        config = {n: params[n] for n in R.TRAINING}
        key = {n: config[n] for n in R.KEY}
        name = json.dumps(key, sort_keys=True)
        if name not in bases:
            bases[name] = _base(grid, key, ledger)
        if bases[name] is None:  # nothing fits: the run's first steps said so
            trial.set_constraint("memory", grid.memory(key, grid.plain()) / grid.budget - 1)
            study.tell(trial, [grid.ips(key, grid.plain()), 0.0])
            continue
        lazy = _LazyTrial(grid, config, bases[name], chosen.get(name))
        for report, point in enumerate(grid.curve(config)[:-1], start=1):  # its rungs
            ips = grid.ips(config, lazy.combo)
            if name not in chosen and optimistic and speedups:
                ips *= max(speedups)
            values = [
                point["images_per_second"] * ips / grid.ips(config, grid.plain()),
                point["val_accuracy"],
            ]
            if not halving.continues(f"t{number}", report, values, True):
                ledger.pay(lazy.cost_to(report))
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
            if name not in chosen and report == halving.grace:  # passed the rung: probe now
                ledger.pay(lazy.cost_to(report))
                chosen[name] = R._on_top(grid, key, bases[name], ledger)
                speedups.append(grid.ips(key, chosen[name]) / grid.ips(key, bases[name]))
                lazy.switch(chosen[name], report)
        else:
            ledger.pay(lazy.cost_to(evaluations))
            trial.set_constraint("memory", grid.memory(config, lazy.combo) / grid.budget - 1)
            ips, accuracy = grid.ips(config, lazy.combo), grid.accuracy(config)
            study.tell(trial, [ips, accuracy])
            ledger.found(ips, accuracy)
    return ledger


def _base(grid: R.Grid, key: dict[str, Any], ledger: R.Ledger) -> dict[str, Any] | None:
    """Plain when it fits (the run's own first steps check it: nothing paid here); else the
    plain probe that found it over budget and the fastest single knob that fits."""
    plain = grid.plain()
    if grid.fits(key, plain):
        return plain
    ledger.pay(grid.probe_cost(key, plain, 0))
    return R._fit_first(grid, key, plain, ledger)


class _LazyTrial:
    """A trial's training cost when its speed setting changes at a report."""

    def __init__(self, grid: R.Grid, config: dict[str, Any], base: dict, chosen: dict | None):
        self.grid, self.config = grid, config
        self.combo = chosen or base
        self.paid = 0.0  # training paid so far
        self.offset = 0.0  # paid at the earlier setting minus the same reports at this one

    def cost_to(self, report: int) -> float:
        """What is still to pay to reach ``report``; counts it as paid."""
        total = self.grid.train_cost(self.config, self.combo, report) + self.offset
        owed, self.paid = total - self.paid, total
        return owed

    def switch(self, combo: dict[str, Any], report: int) -> None:
        before = self.grid.train_cost(self.config, self.combo, report)
        self.combo = combo
        self.offset += before - self.grid.train_cost(self.config, combo, report)


def replay_one_round(grid: R.Grid, seed: int, budget_s: float, max_trials: int) -> R.Ledger:
    repeats, R.SPEED_REPEATS = R.SPEED_REPEATS, 1
    try:
        return R.replay(NEW, grid, seed, budget_s, max_trials)
    finally:
        R.SPEED_REPEATS = repeats


def replay_dedup(grid: R.Grid, seed: int, budget_s: float, max_trials: int) -> R.Ledger:
    run, told = R._run, {}

    def once(study, trial, g, config, combo, ledger, halving, trial_id, *, probed):
        name = json.dumps(config, sort_keys=True)
        if name in told:  # trained to the end before: tell its values, train nothing
            trial.set_constraint("memory", g.memory(config, combo) / g.budget - 1)
            study.tell(trial, told[name])
            return
        run(study, trial, g, config, combo, ledger, halving, trial_id, probed=probed)
        frozen = study.trials[trial.number]
        if frozen.state == optuna.trial.TrialState.COMPLETE:
            told[name] = frozen.values

    R._run = once
    try:
        return R.replay(NEW, grid, seed, budget_s, max_trials)
    finally:
        R._run = run


VARIANTS = {
    "new": lambda g, s, b, m: R.replay(NEW, g, s, b, m),
    "lazy": replay_lazy,
    "lazy-optimistic": lambda g, s, b, m: replay_lazy(g, s, b, m, optimistic=True),
    "one-round": replay_one_round,
    "dedup": replay_dedup,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=sorted(R.GRIDS), default="resnet")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    grid = R.load_grid(R.GRIDS[args.grid])
    budget = 100 * statistics.mean(t["wall_s"] for t in grid.data["training"])
    target = R.TARGET * grid.front_hv()
    for name in args.variants:
        costs = [
            R.cost_to_reach(VARIANTS[name](grid, seed, budget, 200).history, target)
            for seed in range(args.seeds)
        ]
        reached = sum(math.isfinite(c) for c in costs)
        print(
            f"{args.grid} {name:16s} median compute to {R.TARGET:.0%}: "
            f"{np.median(costs):.0f} s, {reached}/{args.seeds} seeds reach it",
            flush=True,
        )


if __name__ == "__main__":
    main()
