"""Benchmark: how close TPE and random search get to the grid's best, and Ray's per-trial cost.

On ``tiny_grid_space`` (18 configs) it runs, for real, with Ray and the engine:
1. the whole grid (``--sampler grid``), so the best config is known;
2. TPE and random search at an equal trial budget (``--budget``, default 6), objective accuracy,
   no early stopping, and compares their best with the grid's best.

Real searches are one seed each (that is all the time a CPU box allows), so it also *replays*
each sampler over the measured grid (Optuna asks, the grid's measured accuracy answers) for
many seeds: the spread of what a sampler finds at that budget, at no training cost.

Ray's overhead per trial = (search wall time - Ray start/stop) / trials - mean engine time
(probe + training inside the trial), with concurrency 1.

    .venv/bin/python bench/search_bench.py            # ~6-10 min on 2 CPU cores
    .venv/bin/python bench/search_bench.py --smoke-test
Writes reports/benchmarks/search_bench.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna

from tuner.experiment import PARAM_PREFIX
from tuner.spaces import SpaceSampler, get_space
from tuner.tune import SearchDriver, SearchOptions

SPACE = "tiny_grid_space"
OUT = Path(__file__).resolve().parent.parent / "reports" / "benchmarks"
KEY = ("batch_size", "base_lr", "norm")


def _search(sampler: str, budget: int | None, storage: Path, seed: int) -> dict[str, Any]:
    options = SearchOptions(
        space=SPACE,
        name=f"bench-{sampler}",
        storage=str(storage),
        no_report=True,
        num_samples=budget,
        objective="accuracy",
        sampler=sampler,
        seed=seed,
        early_stopping=False,
        remeasure_top=0,
        effects_repeats=0,
    )
    start = time.perf_counter()
    trials = SearchDriver(options).run().experiment.trials
    wall = time.perf_counter() - start
    ended = trials[trials["ray_status"] == "TERMINATED"]
    return {"wall_s": wall, "records": ended.to_dict("records")}


def _ray_start_stop_s() -> float:
    from tuner.tune import cluster

    start = time.perf_counter()
    cluster.connect()
    cluster.shutdown()
    return time.perf_counter() - start


def _config_key(row: dict[str, Any]) -> tuple:
    return tuple(row[PARAM_PREFIX + k] for k in KEY)


def _summary(run: dict[str, Any], ray_s: float) -> dict[str, Any]:
    records: list[dict[str, Any]] = run["records"]  # the trials' rows, Ray ended each
    engine = [r["engine_time_s"] for r in records]
    best = max(records, key=lambda r: r["val_accuracy"])
    return {
        "trials": len(records),
        "wall_s": run["wall_s"],
        "mean_engine_time_s": statistics.fmean(engine),
        "ray_overhead_per_trial_s": (run["wall_s"] - ray_s) / len(records)
        - statistics.fmean(engine),
        "best_val_accuracy": best["val_accuracy"],
        "best_config": dict(zip(KEY, _config_key(best), strict=True)),
    }


def _replay(table: dict[tuple, float], sampler: str, budget: int, seeds: int) -> dict[str, Any]:
    """Each seed: a fresh study whose objective looks the accuracy up in the measured grid."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sample, best = SpaceSampler(SPACE, False), max(table.values())

    def objective(trial: optuna.Trial) -> float:
        sample(trial)
        return table[tuple(trial.params[k] for k in KEY)]

    found = []
    for seed in range(seeds):
        study = optuna.create_study(
            direction="maximize", sampler=_replay_sampler(sampler, seed, budget)
        )
        study.optimize(objective, n_trials=budget)
        found.append(study.best_value)
    regret = [best - f for f in found]
    return {
        "seeds": seeds,
        "mean_best": statistics.fmean(found),
        "std_best": statistics.stdev(found),
        "mean_regret": statistics.fmean(regret),
        "found_grid_best_fraction": sum(r <= 1e-12 for r in regret) / seeds,
    }


def _replay_sampler(name: str, seed: int, budget: int) -> optuna.samplers.BaseSampler:
    from tuner.tune.samplers import make_sampler

    return make_sampler(name, seed=seed, budget=budget, concurrency=1, grid=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=6)
    parser.add_argument("--replay-seeds", type=int, default=50)
    parser.add_argument("--smoke-test", action="store_true", help="budget 3, no grid")
    parser.add_argument("--render", action="store_true", help="rewrite the .md from the .json")
    args = parser.parse_args()
    if args.render:
        results = json.loads((OUT / "search_bench.json").read_text())
        (OUT / "search_bench.md").write_text(_markdown(results))
        return
    ray_s = _ray_start_stop_s()
    results: dict[str, Any] = {"ray_start_stop_s": ray_s}
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        if not args.smoke_test:
            runs["grid"] = _search("grid", None, Path(tmp), seed=0)
        for sampler in ("tpe", "random"):
            runs[sampler] = _search(sampler, 3 if args.smoke_test else args.budget, Path(tmp), 0)
    for name, run in runs.items():
        results[name] = _summary(run, ray_s)
    if "grid" in runs:
        table = {_config_key(r): r["val_accuracy"] for r in runs["grid"]["records"]}
        results["grid_table"] = [
            {**dict(zip(KEY, k, strict=True)), "val_accuracy": v} for k, v in sorted(table.items())
        ]
        grid_best = max(table.values())
        for sampler in ("tpe", "random"):
            found = results[sampler]["best_val_accuracy"]
            results[sampler]["fraction_of_grid_best"] = found / grid_best
            results[sampler]["grid_rank_of_found_best"] = 1 + sum(v > found for v in table.values())
        results["replay"] = {
            s: _replay(table, s, args.budget, args.replay_seeds) for s in ("tpe", "random", "gp")
        }
    results["machine"] = {
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "platform": platform.platform(),
    }
    results["space"] = SPACE
    results["space_workload"] = dict(get_space(SPACE).workloads["cpu"])
    _write(results, smoke=args.smoke_test)


def _write(results: dict[str, Any], *, smoke: bool) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    stem = "search_bench_smoke" if smoke else "search_bench"
    (OUT / f"{stem}.json").write_text(json.dumps(results, indent=2, default=str))
    (OUT / f"{stem}.md").write_text(_markdown(results))
    print(_markdown(results))


def _markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Search benchmark: samplers vs the full grid, and Ray's per-trial overhead",
        "",
        f"Space `{r['space']}` (18 configs), objective val accuracy, concurrency 1, CPU. "
        f"Machine: {r['machine']['cpus']} CPUs, load average at the end "
        f"{r['machine']['load_average_at_end'][0]:.1f} (shared with other jobs: timings are "
        "pessimistic). Command: `.venv/bin/python bench/search_bench.py`.",
        "",
        "| search | trials | best val acc | of grid best | grid rank | wall s | engine s/trial "
        "| Ray overhead s/trial |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ("grid", "tpe", "random"):
        if name not in r:
            continue
        s = r[name]
        frac = f"{s['fraction_of_grid_best']:.3f}" if "fraction_of_grid_best" in s else "1"
        rank = str(s.get("grid_rank_of_found_best", 1))
        lines.append(
            f"| {name} | {s['trials']} | {s['best_val_accuracy']:.3f} | {frac} | {rank} | "
            f"{s['wall_s']:.0f} | {s['mean_engine_time_s']:.1f} | "
            f"{s['ray_overhead_per_trial_s']:.1f} |"
        )
    if "replay" in r:
        lines += [
            "",
            "Replay over the measured grid (no training; Optuna asks, the grid answers), "
            "same budget, many seeds:",
            "",
            "| sampler | seeds | best found (mean ± std) | mean regret | found the grid's best |",
            "|---|---|---|---|---|",
        ]
        for name, s in r["replay"].items():
            lines.append(
                f"| {name} | {s['seeds']} | {s['mean_best']:.3f} ± {s['std_best']:.3f} | "
                f"{s['mean_regret']:.3f} | {100 * s['found_grid_best_fraction']:.0f} % |"
            )
    lines += [
        "",
        f"Ray start + stop: {r['ray_start_stop_s']:.1f} s. Ray overhead per trial = (search "
        "wall - Ray start/stop) / trials - mean engine time: it is mostly a fresh worker "
        "process per trial (Python + torch + timm imports), the price of honest per-trial "
        "memory numbers (`reuse_actors=False`).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
