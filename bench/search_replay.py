"""Replay search strategies offline over the measured grid: hypervolume against compute spent.

``bench/search_grid.py`` measured, once, every learning curve and every speed combination of a
small space. Here each strategy runs many seeds with the **real** pieces — Optuna's samplers
as the search builds them (``tuner.tune.samplers.make_sampler``), the start-up design
(``tuner.tune.design``), the speed-probe decision (``tuner.speed.choose.decide``) and the
early-stopping core (``tuner.tune.halving.ParetoHalving``, what ``ParetoASHA`` runs) — answered from
the grid instead of by training. No training runs; only the compute the strategy would have
spent is counted, in engine seconds measured on the grid.

Strategies (concurrency 1, a memory budget that rejects part of the grid):

- ``tpe-joint`` (the first release's default): multi-objective TPE over training knobs *and*
  speed knobs; every trial runs a separate feasibility probe, then trains to the end;
- ``random``, ``nsga2``: the same joint space and full trainings, other samplers;
- ``new``: TPE over the training knobs only, the start-up design, speed knobs chosen by probes
  per training config (cached), the feasibility check from the run's first steps, ParetoASHA;
- its parts alone: ``probes-only`` (training-knob TPE + speed probes), ``design-only`` (joint
  TPE + start-up design), ``halving-only`` (joint TPE + ParetoASHA).

Hypervolume: of the feasible points a strategy trained to the end, with their measured values
(throughput = the speed combination's median probe images/s, accuracy = the training config's
final validation accuracy), throughput normalized by the grid's best feasible throughput,
accuracy as is, reference point (0, 0); so the grid's own front has the largest possible value.

    .venv/bin/python bench/search_replay.py                 # both grids, 20 held-out seeds
    .venv/bin/python bench/search_replay.py --seeds 2 --grid /tmp/grid_smoke.json --out /tmp/r
Writes reports/benchmarks/search_replay.{md,json,png}.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd

from tuner.compare import Arm
from tuner.config import TrainConfig
from tuner.objectives import pareto_mask
from tuner.speed import combination, decide, settle
from tuner.tune.design import startup_design
from tuner.tune.halving import ParetoHalving
from tuner.tune.plan import SpaceProfile
from tuner.tune.samplers import make_sampler

ROOT = Path(__file__).resolve().parent.parent
GRID = Path(__file__).resolve().parent / "data" / "search_grid.json"
OUT = ROOT / "reports" / "benchmarks"
TRAINING = ("batch_size", "norm", "amp", "base_lr")
KEY = ("batch_size", "norm", "amp")
TARGET = 0.95
FIRST_RELEASE = "tpe-joint"
GRIDS = {"vit": GRID, "resnet": GRID.with_name("search_grid_resnet.json")}
# The strategies' settings were chosen looking at seeds 0-19; the report replays others.
FIRST_HELD_OUT_SEED = 100
SPEED_REPEATS = 2  # as tuner search's default --speed-repeats


# ---- the grid --------------------------------------------------------------------------------


class Grid:
    """Lookups into the measured grid."""

    def __init__(self, data: dict[str, Any], budget_bytes: float | None) -> None:
        self.data = data
        self.about = data["about"]
        self.space: dict[str, list[Any]] = self.about["space"]
        self.speed_knobs: list[str] = self.about["speed_knobs"]
        self.training = {self._tkey(t["config"]): t for t in data["training"]}
        self.speed = {(self._skey(r["key"]), self._ckey(r["combo"])): r for r in data["speed"]}
        self.budget = budget_bytes
        self.best_ips = max(self.ips(k, c) for k, c in self.speed if self.fits(k, c))

    @staticmethod
    def _tkey(config: dict[str, Any]) -> str:
        return json.dumps({n: config[n] for n in TRAINING}, sort_keys=True)

    @staticmethod
    def _skey(key: dict[str, Any]) -> str:
        return json.dumps({n: key[n] for n in KEY}, sort_keys=True)

    @staticmethod
    def _ckey(combo: dict[str, Any]) -> str:
        return json.dumps(combo, sort_keys=True)

    def plain(self) -> dict[str, Any]:
        return {k: (0 if k == "num_workers" else False) for k in self.speed_knobs}

    def cell(self, key: dict[str, Any], combo: dict[str, Any]) -> dict[str, Any]:
        return self.speed[(self._skey(key), self._ckey(combo))]

    def ips(self, key: Any, combo: Any) -> float:
        cell = self.speed[(key, combo)] if isinstance(key, str) else self.cell(key, combo)
        return statistics.median(r["images_per_second"] for r in cell["repeats"])

    def memory(self, key: Any, combo: Any) -> float:
        cell = self.speed[(key, combo)] if isinstance(key, str) else self.cell(key, combo)
        return statistics.median(r["peak_memory_bytes"] for r in cell["repeats"])

    def fits(self, key: Any, combo: Any) -> bool:
        return self.budget is None or self.memory(key, combo) <= self.budget

    def curve(self, config: dict[str, Any]) -> list[dict[str, Any]]:
        return self.training[self._tkey(config)]["curve"]

    def accuracy(self, config: dict[str, Any]) -> float:
        return float(self.curve(config)[-1]["val_accuracy"])

    def train_cost(self, config: dict[str, Any], combo: dict[str, Any], reports: int) -> float:
        """Engine seconds to reach the ``reports``-th evaluation with this speed combination:
        the plain run's wall time, its training steps rescaled by the combination's speed."""
        point = self.curve(config)[reports - 1]
        ratio = self.ips(config, self.plain()) / self.ips(config, combo)
        return point["wall_s"] - point["train_time_s"] + point["train_time_s"] * ratio

    def probe_cost(self, key: dict[str, Any], combo: dict[str, Any], repeat: int) -> float:
        return float(self.cell(key, combo)["repeats"][repeat]["wall_s"])

    def front_hv(self) -> float:
        points = [(self.ips(k, c), self.accuracy(json.loads(t)))
                  for t in self.training for (k, c) in self.speed
                  if k == self._skey(json.loads(t)) and self.fits(k, c)]  # fmt: skip
        return hypervolume(points, self.best_ips)


def hypervolume(points: list[tuple[float, float]], best_ips: float) -> float:
    """2-D hypervolume of (throughput / best_ips, accuracy) points from reference (0, 0)."""
    if not points:
        return 0.0
    values = np.array([(ips / best_ips, acc) for ips, acc in points], dtype=float)
    front = values[pareto_mask(values, ["max", "max"])]
    front = front[np.argsort(-front[:, 0])]
    area, height = 0.0, 0.0
    for x, y in front:  # x descending, y ascending along a front
        area += x * (y - height) if y > height else 0.0
        height = max(height, y)
    return float(area)


# ---- one search, replayed --------------------------------------------------------------------


@dataclass
class Ledger:
    """Compute spent and the hypervolume after each event."""

    grid: Grid
    spent: float = 0.0
    points: list[tuple[float, float]] = field(default_factory=list)
    history: list[tuple[float, float]] = field(default_factory=list)

    def pay(self, seconds: float) -> None:
        self.spent += seconds
        self.history.append((self.spent, hypervolume(self.points, self.grid.best_ips)))

    def found(self, ips: float, acc: float) -> None:
        self.points.append((ips, acc))
        self.history.append((self.spent, hypervolume(self.points, self.grid.best_ips)))


@dataclass(frozen=True)
class Strategy:
    name: str
    sampler: str = "tpe"
    joint: bool = True  # speed knobs in the sampler's space (else: chosen by probes)
    design: bool = False
    halving: bool = False
    probe_first: bool = False  # the first release's trial: a separate probe, then the run


STRATEGIES = [
    Strategy("tpe-joint", probe_first=True),
    Strategy("random", sampler="random", probe_first=True),
    Strategy("nsga2", sampler="nsga2", probe_first=True),
    Strategy("new", joint=False, design=True, halving=True),
    Strategy("probes-only", joint=False),
    Strategy("design-only", design=True),
    Strategy("halving-only", halving=True),
]


def replay(strategy: Strategy, grid: Grid, seed: int, budget_s: float, max_trials: int) -> Ledger:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    study = optuna.create_study(
        directions=["maximize", "maximize"],
        sampler=make_sampler(
            strategy.sampler, seed=seed, budget=max_trials, concurrency=1, grid=None
        ),
    )
    space = _space(grid, joint=strategy.joint)
    if strategy.design:
        profile = SpaceProfile([], {k: list(v) for k, v in space.items()}, set(), set(space))
        for row in startup_design(profile, budget=max_trials, seed=seed):
            study.enqueue_trial(row)
    evaluations = len(next(iter(grid.training.values()))["curve"])
    halving = ParetoHalving.for_trials_of(["max", "max"], evaluations) if strategy.halving else None
    ledger, cache = Ledger(grid), {}
    for number in range(max_trials):
        if ledger.spent >= budget_s:
            break
        trial = study.ask()
        params = {name: trial.suggest_categorical(name, choices) for name, choices in space.items()}
        config = {n: params[n] for n in TRAINING}
        combo = {k: params[k] for k in grid.speed_knobs} if strategy.joint else \
            _probed(grid, config, cache, ledger)  # fmt: skip
        if strategy.probe_first:  # the probe is paid here; an over-budget trial stops after it
            ledger.pay(grid.probe_cost(config, combo, 0))
        _run(study, trial, grid, config, combo, ledger, halving, f"t{number}",
             probed=strategy.probe_first)  # fmt: skip
    return ledger


def _space(grid: Grid, *, joint: bool) -> dict[str, list[Any]]:
    space = {k: list(v) for k, v in grid.space.items()}
    if joint:
        for k in grid.speed_knobs:
            space[k] = [0, 1] if k == "num_workers" else [False, True]
    return space


def _probed(grid: Grid, config: dict[str, Any], cache: dict[str, Any], ledger: Ledger) -> dict:
    """The speed combination the probes choose for this config's key (cached per key), as
    tuner.speed.choose.choose_speed decides it."""
    key = {n: config[n] for n in KEY}
    name = json.dumps(key, sort_keys=True)
    if name not in cache:
        plain = grid.plain()
        ledger.pay(grid.probe_cost(key, plain, 0))  # the plain setting alone first
        base = plain if grid.fits(key, plain) else _fit_first(grid, key, plain, ledger)
        cache[name] = base if base is None else _on_top(grid, key, base, ledger)
    return cache[name] or grid.plain()


def _fit_first(grid: Grid, key: dict[str, Any], plain: dict[str, Any], ledger: Ledger) -> dict:
    """tuner.speed.choose._fit_first: each knob once, for memory; the fastest that fits."""
    singles = [_switched(plain, k) for k in grid.speed_knobs]
    for single in singles:
        ledger.pay(grid.probe_cost(key, single, 0))
    fitting = [c for c in singles if grid.fits(key, c)]
    return max(fitting, key=lambda c: grid.ips(key, c)) if fitting else None


def _on_top(grid: Grid, key: dict[str, Any], base: dict[str, Any], ledger: Ledger) -> dict:
    """Interleaved probe rounds of each knob not yet on against ``base``, then the kept knobs
    together (tuner.speed.choose._probe_rounds)."""
    free = [k for k in grid.speed_knobs if not base[k]]
    if not free:
        return base
    singles = [_switched(base, k) for k in free]
    arms = [Arm("plain", "speed", TrainConfig(), {}),
            *(Arm(k, "speed", TrainConfig(), {k: c[k]}, "plain")
              for k, c in zip(free, singles, strict=True))]  # fmt: skip
    runs = _probe_rounds(grid, key, [base, *singles], arms, ledger)
    rows, _ = decide(runs, arms, max_memory_bytes=grid.budget)
    combined = None
    if sum(row["kept"] for row in rows) >= 2:  # tuner.speed.choose._combined_ratio: two pairs
        together = {**base, **{k: v for k, v in combination(rows).items() if k in base}}
        combined = _combined(grid, key, base, together, ledger)
    settings = settle(rows, combined)
    return {**base, **{k: v for k, v in settings.items() if k in base}}


def _switched(combo: dict[str, Any], knob: str) -> dict[str, Any]:
    return {**combo, knob: 1 if knob == "num_workers" else True}


def _combined(grid: Grid, key: dict[str, Any], plain: dict[str, Any], together: dict[str, Any],
              ledger: Ledger) -> float | None:  # fmt: skip
    if not grid.fits(key, together):
        return None
    logs = []
    for repeat in range(2):
        a = grid.cell(key, plain)["repeats"][repeat]
        b = grid.cell(key, together)["repeats"][repeat]
        ledger.pay(a["wall_s"] + b["wall_s"])
        logs.append(math.log(b["images_per_second"] / a["images_per_second"]))
    return math.exp(sum(logs) / len(logs))


def _probe_rounds(grid: Grid, key: dict[str, Any], cells: list[dict[str, Any]],
                  arms: list[Arm], ledger: Ledger) -> pd.DataFrame:  # fmt: skip
    """The live probes' rounds (tuner.speed.choose._rounds): all arms, then after each round
    only those ahead of plain in every pair so far."""
    rows, live = [], list(range(len(cells)))
    repeats = min(SPEED_REPEATS, len(grid.cell(key, cells[0])["repeats"]))
    for repeat in range(repeats):
        for index in live:
            measured = grid.cell(key, cells[index])["repeats"][repeat]
            ledger.pay(measured["wall_s"])
            rows.append({"arm": arms[index].name, "group": "speed", "repeat": repeat,
                         "status": "ok", "images_per_second": measured["images_per_second"],
                         "peak_memory_bytes": measured["peak_memory_bytes"],
                         "memory_kind": "cpu_training_state", "val_accuracy": math.nan,
                         "fell_back": ""})  # fmt: skip
        if repeat < repeats - 1:
            frame = pd.DataFrame(rows)
            live = [0, *(i for i in live[1:] if _ahead(frame, arms[i].name))]
    return pd.DataFrame(rows)


def _ahead(runs: pd.DataFrame, name: str) -> bool:
    table = runs.pivot_table(index="repeat", columns="arm", values="images_per_second")
    return bool((table[name] > table["plain"]).all())


def _run(study: optuna.Study, trial: optuna.Trial, grid: Grid, config: dict[str, Any],
         combo: dict[str, Any], ledger: Ledger, halving: ParetoHalving | None,
         trial_id: str, *, probed: bool) -> None:  # fmt: skip
    """One trial: feasibility from its first steps, then training with early stopping."""
    ips = grid.ips(config, combo)
    if not grid.fits(config, combo):
        if not probed:
            ledger.pay(grid.probe_cost(config, combo, 0))  # its run's first steps only
        violation = grid.memory(config, combo) / grid.budget - 1
        trial.set_constraint("memory", violation)
        study.tell(trial, [ips, 0.0])
        return
    curve = grid.curve(config)
    for report, point in enumerate(curve, start=1):
        if halving is not None and report < len(curve):
            values = [point["images_per_second"] * ips / grid.ips(config, grid.plain()),
                      point["val_accuracy"]]  # fmt: skip
            if not halving.continues(trial_id, report, values, True):
                ledger.pay(grid.train_cost(config, combo, report))
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                return
    ledger.pay(grid.train_cost(config, combo, len(curve)))
    trial.set_constraint("memory", grid.memory(config, combo) / grid.budget - 1
                         if grid.budget else -1.0)  # fmt: skip
    accuracy = grid.accuracy(config)
    study.tell(trial, [ips, accuracy])
    ledger.found(ips, accuracy)


# ---- many seeds, and the summary -------------------------------------------------------------


def hv_at(history: list[tuple[float, float]], budget: float) -> float:
    best = 0.0
    for spent, hv in history:
        if spent > budget:
            break
        best = hv
    return best


def cost_to_reach(history: list[tuple[float, float]], target: float) -> float:
    return next((spent for spent, hv in history if hv >= target), math.inf)


def run_all(
    grid: Grid,
    seeds: Sequence[int],
    budget_s: float,
    max_trials: int,
    strategies: list[Strategy],
    log: Callable[[str], Any] = print,
    jobs: int = 1,
) -> dict[str, Any]:
    grid_hv = grid.front_hv()
    budgets = np.linspace(0, budget_s, 41)
    results: dict[str, Any] = {}
    for strategy in strategies:
        ledgers = _replays(strategy, grid, seeds, budget_s, max_trials, jobs)
        curves = np.array([[hv_at(x.history, b) / grid_hv for b in budgets] for x in ledgers])
        reach = [cost_to_reach(x.history, TARGET * grid_hv) for x in ledgers]
        results[strategy.name] = {
            "median_hv_fraction": np.median(curves, axis=0).tolist(),
            "q25": np.quantile(curves, 0.25, axis=0).tolist(),
            "q75": np.quantile(curves, 0.75, axis=0).tolist(),
            "cost_to_95": reach,
            "median_cost_to_95": float(np.median(reach)),
            "reached": int(sum(math.isfinite(r) for r in reach)),
        }
        log(f"{strategy.name:14s} median compute to {TARGET:.0%} of the grid's HV: "
            f"{results[strategy.name]['median_cost_to_95']:.0f} s "
            f"({results[strategy.name]['reached']}/{len(seeds)} seeds reach it)")  # fmt: skip
    for result in results.values():
        result["ratio_interval"] = ratio_interval(result["cost_to_95"],
                                                  results[FIRST_RELEASE]["cost_to_95"])  # fmt: skip
    evaluations = len(next(iter(grid.training.values()))["curve"])
    return {"grid_hv": grid_hv, "budgets_s": budgets.tolist(), "strategies": results,
            "evaluations": evaluations,
            "seeds": list(seeds), "budget_s": budget_s, "max_trials": max_trials,
            "memory_budget_bytes": grid.budget, "best_ips": grid.best_ips}  # fmt: skip


def _replays(strategy: Strategy, grid: Grid, seeds: Sequence[int], budget_s: float,
             max_trials: int, jobs: int) -> list[Ledger]:  # fmt: skip
    """One replay per seed; seeds are independent, so ``jobs`` processes share them."""
    if jobs <= 1:
        return [replay(strategy, grid, seed, budget_s, max_trials) for seed in seeds]
    with ProcessPoolExecutor(jobs) as pool:
        n = len(seeds)
        return list(pool.map(replay, [strategy] * n, [grid] * n, seeds, [budget_s] * n,
                             [max_trials] * n))  # fmt: skip


def ratio_interval(costs: list[float], reference: list[float], draws: int = 4000) -> list[float]:
    """A 95 % bootstrap interval (seeds resampled, both strategies independently) of the ratio
    of median compute to 95 % (a seed that never reached it counts as infinite)."""
    rng = np.random.default_rng(0)
    a, b = np.array(costs, dtype=float), np.array(reference, dtype=float)
    mine = np.median(rng.choice(a, (draws, len(a))), axis=1)
    theirs = np.median(rng.choice(b, (draws, len(b))), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(np.isinf(theirs) & np.isinf(mine), np.nan, mine / theirs)
    ratios = ratios[~np.isnan(ratios)]
    if not len(ratios):
        return [math.nan, math.nan]
    return [float(np.quantile(ratios, 0.025)), float(np.quantile(ratios, 0.975))]


def load_grid(path: Path, memory_budget_mib: float | None = None) -> Grid:
    data = json.loads(path.read_text())
    memories = [statistics.median(r["peak_memory_bytes"] for r in c["repeats"])
                for c in data["speed"]]  # fmt: skip
    # A budget that rejects a quarter of the combinations (batch 128 in fp32 on the vit grid,
    # while AMP makes it fit: the trade-off the search must find).
    quartile = float(np.quantile(memories, 0.75))
    return Grid(data, memory_budget_mib * 2**20 if memory_budget_mib else quartile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grids", nargs="+", choices=sorted(GRIDS), default=list(GRIDS))
    parser.add_argument("--grid", type=Path, default=None, help="one grid file instead")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=FIRST_HELD_OUT_SEED)
    parser.add_argument("--max-trials", type=int, default=200)
    parser.add_argument(
        "--budget-trainings",
        type=float,
        default=100.0,
        help="compute budget per search, in average full trainings (large enough that the "
        "first release reaches the target in most seeds: a truncated median flatters it)",
    )
    parser.add_argument(
        "--memory-budget-mib",
        type=float,
        default=None,
        help="default: the 75th percentile of the grid's combinations' peak memory",
    )
    parser.add_argument("--jobs", type=int, default=1, help="processes replaying seeds")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    paths = {args.grid.stem: args.grid} if args.grid else {g: GRIDS[g] for g in args.grids}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    reports = {}
    for name, path in paths.items():
        grid = load_grid(path, args.memory_budget_mib)
        full = statistics.mean(t["wall_s"] for t in grid.data["training"])
        print(f"grid {name}:", flush=True)
        report = run_all(grid, seeds, args.budget_trainings * full, args.max_trials, STRATEGIES,
                         jobs=args.jobs)  # fmt: skip
        report["about"] = {**grid.about, "average_training_s": full}
        reports[name] = report
    write(reports, args.out)


def write(reports: dict[str, dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "search_replay.json").write_text(json.dumps({"grids": reports}, indent=1))
    (out / "search_replay.md").write_text(to_markdown(reports))
    plot(reports, out / "search_replay.png")


def to_markdown(reports: dict[str, dict[str, Any]]) -> str:
    lines = [
        "# Search efficiency: replayed over measured grids",
        "",
        "Each strategy runs once per seed over a grid measured beforehand "
        "(`bench/search_grid.py`), with the real samplers, start-up design, speed-probe decision "
        "and halving core; only the compute it would have spent is counted. Hypervolume of the "
        "feasible front found (throughput / the grid's best feasible throughput, val accuracy; "
        f"reference point (0, 0)), as a fraction of the grid's own front. Target: {TARGET:.0%}. "
        f"Seeds {FIRST_HELD_OUT_SEED} on are held out: the strategies' settings were chosen on "
        "seeds 0-19. A seed that never reaches the target counts as infinite compute; the "
        "ratio's interval is a 95 % bootstrap over seeds.",
        "",
    ]
    for name, report in reports.items():
        lines += _grid_section(name, report)
    return "\n".join(lines)


def _grid_section(name: str, report: dict[str, Any]) -> list[str]:
    s, about = report["strategies"], report["about"]
    seeds = report["seeds"]
    lines = [
        f"## Grid `{name}`",
        "",
        f"{_configs(report)} training configs ({_space_text(about['space'])}) x "
        f"{2 ** len(about['speed_knobs'])} speed combinations, {about['workload']['model']}, "
        f"measured on {about['machine']} ({about['date']}, torch {about['torch']}). Memory budget "
        f"{report['memory_budget_bytes'] / 2**20:.1f} MiB (rejects a quarter of the "
        f"combinations). {_budget_text(about, report)} Seeds {seeds[0]}-{seeds[-1]}, concurrency "
        f"1, compute budget {report['budget_s']:.0f} engine seconds "
        f"(~{report['budget_s'] / about['average_training_s']:.0f} full trainings).",
        "",
        "| strategy | median compute to 95% (s) [IQR] | vs tpe-joint [95% CI] | seeds reaching it "
        "| median HV at 10% budget | at 1/3 | at full budget |",
        "|---|---|---|---|---|---|---|",
    ]
    budgets = report["budgets_s"]
    tenth, third = _index_at(budgets, 0.1), _index_at(budgets, 1 / 3)
    today = s[FIRST_RELEASE]["median_cost_to_95"]
    for strategy, r in s.items():
        cost = r["median_cost_to_95"]
        q25, q75 = np.quantile(np.array(r["cost_to_95"], dtype=float), [0.25, 0.75])
        ratio = cost / today if math.isfinite(cost) and math.isfinite(today) and today else math.nan
        low, high = r["ratio_interval"]
        lines.append(
            f"| {strategy} | {cost:.0f} [{q25:.0f}-{q75:.0f}] | {ratio:.2f}x [{low:.2f}-"
            f"{high:.2f}] | {r['reached']}/{len(seeds)} | {r['median_hv_fraction'][tenth]:.3f} | "
            f"{r['median_hv_fraction'][third]:.3f} | {r['median_hv_fraction'][-1]:.3f} |"
        )
    if "new" in s and "random" in s:
        behind = [(b, n, r) for b, n, r in zip(budgets, s["new"]["median_hv_fraction"],
                                                s["random"]["median_hv_fraction"], strict=True)
                  if n < r and b >= 0.1 * report["budget_s"]]  # fmt: skip
        counted = sum(b >= 0.1 * report["budget_s"] for b in budgets)
        lines += ["", f"From 10 % of the budget on, the new design is at or ahead of random "
                  f"search (median HV) at {counted - len(behind)} of {counted} budgets"
                  + (": behind at " + ", ".join(f"{b:.0f} s ({n:.3f} vs {r:.3f})"
                                                for b, n, r in behind) if behind else "")
                  + "."]  # fmt: skip
    return [*lines, ""]


def _budget_text(about: dict[str, Any], report: dict[str, Any]) -> str:
    """Each config's training budget, in its unit: equal images (the search's since issue 47),
    or the first grid's fixed steps, where a larger batch saw more images."""
    evaluations = report.get("evaluations") or about.get("evaluations")
    if about.get("images"):
        every = f", evaluated {evaluations} times at equal images" if evaluations else ""
        return (
            f"Each config trained {about['images']:,} images, whatever its batch size{every}: "
            "the halving rungs and the front compare equal images."
        )
    steps = about["workload"].get("steps")
    return (
        f"Each config trained {steps} steps, so a larger batch saw more images (the budget "
        "unit before issue 47)."
    )


def _index_at(budgets: list[float], fraction: float) -> int:
    return int(np.searchsorted(budgets, fraction * budgets[-1]))


def _space_text(space: dict[str, list[Any]]) -> str:
    return ", ".join(f"{k} {'/'.join(str(v) for v in values)}" for k, values in space.items())


def _configs(report: dict[str, Any]) -> int:
    return math.prod(len(v) for v in report["about"]["space"].values())


def plot(reports: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reports), figsize=(6.5 * len(reports), 4.4), squeeze=False)
    for ax, (name, report) in zip(axes[0], reports.items(), strict=True):
        budgets = np.array(report["budgets_s"])
        for strategy, r in report["strategies"].items():
            line = ax.plot(budgets, r["median_hv_fraction"], label=strategy,
                           lw=2.4 if strategy in ("new", FIRST_RELEASE) else 1.2)  # fmt: skip
            ax.fill_between(budgets, r["q25"], r["q75"], color=line[0].get_color(), alpha=0.12)
        ax.axhline(TARGET, c="gray", ls="--", lw=1)
        ax.set(xlabel="compute spent (engine seconds)", ylabel="HV / grid's HV (median, IQR)",
               title=f"grid {name}, {len(report['seeds'])} seeds per strategy")  # fmt: skip
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
