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
- ``transfer``: a key's speed setting taken from the first key probed in full with the same
  norm and AMP, when it is faster than the plain setting in two interleaved pairs (else the key
  is probed in full);
- ``free-probes``: not a design but a bound: ``new`` with its speed probes paid by nobody. No
  probe design (fewer rounds, probes inside the trial's own run) can do better than this, so it
  says how much of the gap to a compute goal is the probes' and how much the training's.

``--held-out-credit`` checks the measure instead of the design: the strategies see only the first
two repeats of each grid cell, and what they find is credited with the cell's other repeats (the
grid's reference front too), so a strategy that trains many speed combinations of one config is
not credited with the best of their noisy medians (a winner's curse).

    .venv/bin/python bench/search_replay_variants.py --grid resnet --variants lazy new
    .venv/bin/python bench/search_replay_variants.py --grid vit --held-out-credit \
        --variants new tpe-joint random
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_replay as R  # a script beside this one, not a package

from tuner.objectives import pareto_mask
from tuner.tune.design import startup_design
from tuner.tune.halving import ParetoHalving
from tuner.tune.plan import SpaceProfile
from tuner.tune.samplers import make_sampler

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
    with mock.patch.object(R, "SPEED_REPEATS", 1):
        return R.replay(NEW, grid, seed, budget_s, max_trials)


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

    with mock.patch.object(R, "_run", once):
        return R.replay(NEW, grid, seed, budget_s, max_trials)


def replay_transfer(grid: R.Grid, seed: int, budget_s: float, max_trials: int) -> R.Ledger:
    probed = R._probed

    def transferred(g: R.Grid, config: dict[str, Any], cache: dict[str, Any], ledger: R.Ledger):
        key = {n: config[n] for n in R.KEY}
        name, cell = json.dumps(key, sort_keys=True), ("cell", config["norm"], config["amp"])
        plain, donor = g.plain(), cache.get(cell)
        if name not in cache and donor is not None and g.fits(key, plain) and g.fits(key, donor):
            wins = 0
            for repeat in range(2):  # two interleaved pairs, as the combination check
                a, b = (g.cell(key, c)["repeats"][repeat] for c in (plain, donor))
                ledger.pay(a["wall_s"] + b["wall_s"])
                wins += b["images_per_second"] > a["images_per_second"]
            if wins == 2:
                cache[name] = donor
        choice = probed(g, config, cache, ledger)
        if cell not in cache and cache.get(name) is not None and g.fits(key, plain):
            cache[cell] = cache[name]
        return choice

    with mock.patch.object(R, "_probed", transferred):
        return R.replay(NEW, grid, seed, budget_s, max_trials)


def replay_free_probes(grid: R.Grid, seed: int, budget_s: float, max_trials: int) -> R.Ledger:
    probed = R._probed

    def free(g: R.Grid, config: dict[str, Any], cache: dict[str, Any], ledger: R.Ledger) -> dict:
        spent, events = ledger.spent, len(ledger.history)
        choice = probed(g, config, cache, ledger)
        ledger.spent = spent  # the same choice, its probes unpaid
        del ledger.history[events:]
        return choice

    with mock.patch.object(R, "_probed", free):
        return R.replay(NEW, grid, seed, budget_s, max_trials)


class HeldOutGrid(R.Grid):
    """The grid as ``--held-out-credit`` sees it: ``ips`` from the first two repeats (what the
    strategies measure), ``credit`` from the rest (what they are scored with)."""

    def __init__(self, data: dict[str, Any], budget_bytes: float | None) -> None:
        super().__init__(data, budget_bytes)
        obs, credited = self._reference_points()
        front = pareto_mask(np.array(obs), ["max", "max"])
        self.best_ips = max(c[0] for c, keep in zip(credited, front, strict=True) if keep)
        self.reference_hv = credited_hv(obs, credited, self.best_ips)

    def _repeats(self, key: Any, combo: Any) -> list[dict[str, Any]]:
        return (self.speed[(key, combo)] if isinstance(key, str) else self.cell(key, combo))[
            "repeats"
        ]

    def ips(self, key: Any, combo: Any) -> float:
        return statistics.median(r["images_per_second"] for r in self._repeats(key, combo)[:2])

    def credit(self, key: Any, combo: Any) -> float:
        return statistics.median(r["images_per_second"] for r in self._repeats(key, combo)[2:])

    def _reference_points(self) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        obs, credited = [], []
        for name, training in self.training.items():
            accuracy = float(training["curve"][-1]["val_accuracy"])
            key = self._skey(json.loads(name))
            for k, combo in self.speed:
                if k == key and self.fits(k, combo):
                    obs.append((self.ips(k, combo), accuracy))
                    credited.append((self.credit(k, combo), accuracy))
        return obs, credited


def credited_hv(obs: list, credited: list, best_ips: float) -> float:
    """The hypervolume of the front chosen by what was measured, scored by the held-out values."""
    if not obs:
        return 0.0
    front = pareto_mask(np.array(obs, dtype=float), ["max", "max"])
    return R.hypervolume([c for c, keep in zip(credited, front, strict=True) if keep], best_ips)


@dataclass
class HeldOutLedger(R.Ledger):
    """A ledger whose hypervolume credits each point found with its held-out repeats."""

    measured: list = field(default_factory=list)
    credited: list = field(default_factory=list)
    trial: tuple = ()  # (config, combo) of the trial being told: set by the run hook

    def _hv(self) -> float:
        return credited_hv(self.measured, self.credited, self.grid.best_ips)

    def pay(self, seconds: float) -> None:
        self.spent += seconds
        self.history.append((self.spent, self._hv()))

    def found(self, ips: float, acc: float) -> None:
        self.points.append((ips, acc))
        self.measured.append((ips, acc))
        self.credited.append((self.grid.credit(*self.trial), acc))
        self.history.append((self.spent, self._hv()))


def held_out_credit() -> None:
    """Route every replay through the held-out ledger (this script's process only)."""
    run = R._run

    def tracked(study, trial, grid, config, combo, ledger, *args, **kwargs):
        ledger.trial = (config, combo)
        return run(study, trial, grid, config, combo, ledger, *args, **kwargs)

    R._run, R.Ledger = tracked, HeldOutLedger


def _strategy(name: str) -> Any:
    strategy = next(s for s in R.STRATEGIES if s.name == name)
    return lambda g, s, b, m: R.replay(strategy, g, s, b, m)


VARIANTS = {
    **{name: _strategy(name) for name in ("new", "tpe-joint", "random")},
    "lazy": replay_lazy,
    "lazy-optimistic": lambda g, s, b, m: replay_lazy(g, s, b, m, optimistic=True),
    "one-round": replay_one_round,
    "dedup": replay_dedup,
    "transfer": replay_transfer,
    "free-probes": replay_free_probes,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=sorted(R.GRIDS), default="resnet")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0, help="100: the held-out seeds")
    parser.add_argument("--held-out-credit", action="store_true", help="see the docstring")
    args = parser.parse_args()
    grid = R.load_grid(R.GRIDS[args.grid])
    reference = grid.front_hv()
    if args.held_out_credit:
        held_out_credit()
        grid = HeldOutGrid(grid.data, grid.budget)
        reference = grid.reference_hv
    budget = 100 * statistics.mean(t["wall_s"] for t in grid.data["training"])
    budgets = np.linspace(0, budget, 41)
    curves = {}
    for name in args.variants:
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        ledgers = [VARIANTS[name](grid, seed, budget, 200) for seed in seeds]
        costs = [R.cost_to_reach(x.history, R.TARGET * reference) for x in ledgers]
        curves[name] = np.median(
            [[R.hv_at(x.history, b) / reference for b in budgets] for x in ledgers], axis=0
        )
        reached = sum(math.isfinite(c) for c in costs)
        print(
            f"{args.grid} {name:16s} median compute to {R.TARGET:.0%}: "
            f"{np.median(costs):.0f} s, {reached}/{args.seeds} seeds reach it; median HV "
            f"fraction at 10 %, 1/3, all of the budget: "
            + ", ".join(f"{curves[name][i]:.3f}" for i in (4, 14, 40)),
            flush=True,
        )
    if "new" in curves and "random" in curves:
        late = budgets >= 0.1 * budget
        behind = (curves["new"] < curves["random"]) & late
        print(f"new behind random (median HV) at {behind.sum()} of {late.sum()} budgets from 10 %")


if __name__ == "__main__":
    main()
