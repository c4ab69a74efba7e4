"""Recommendations retrained at equal images and at equal training seconds, several seeds each,
interleaved: the accuracy each reaches, and the seconds and images each takes to a target.

Issue 47: main's search recommended by images/s at unequal budgets (a trial of batch 64 saw
6,400 images in its 100 steps, one of batch 256 20,736), so its accuracy axis measured the
budget. This retrains two or more configs (``--arm NAME=recommended_*.json``, a run config as
``tuner train --config`` reads it) under each ``--budget``:

- ``images=N``: N training images each (steps, epochs and time budget off), evaluated every
  ``--eval-every-images``: the comparison at equal data;
- ``seconds=S``: S seconds of training each (``time_budget_s`` the only budget, evaluation
  excluded), evaluated every ``--eval-every-s`` seconds: the comparison at equal wall time.

Runs go round-robin over the arms and budgets (A, B, C under each budget, then seed 2: a drift
of a busy machine hits every arm alike), ``--seeds`` new seeds, one torch thread per run as the
trials ran; the 1-minute load average is read before and after each run (the machine may be
shared). Each run's curve is kept, so the training seconds and images to ``--target`` accuracy
are read from it. The retraining is the search's own (:func:`tuner.compare.seeds.retrain`), the
accuracy interval :func:`tuner.stats.seed_accuracy`, each arm against the first by
:func:`tuner.stats.seed_accuracy_difference` (its verdict the one rule: inside the noise, a tie).

    flock /work/helpers/measure.lock .venv/bin/python bench/equal_time_pick.py \\
        --arm pick=reports/.../recommended_time_to_target.json --arm b64=b64.json \\
        --arm b256=b256.json --budget images=12800 --budget seconds=20 --seeds 3
Writes reports/benchmarks/equal_time_pick.{json,md} (``--render``: the .md from the .json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from tuner.compare.seeds import SEED_COLUMNS, SeedArm, retrain, seed_accuracy_of
from tuner.config import TrainConfig, load_config_file
from tuner.stats import SEED_ACCURACY_METHOD, seed_accuracy_difference

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "benchmarks"
UNITS = {"images": "training images", "seconds": "seconds of training (evaluation excluded)"}


def budgeted(
    config: TrainConfig, budget: str, amount: float, args: argparse.Namespace
) -> TrainConfig:
    """``config`` with one budget (``images`` or ``seconds``), on the CPU, ``args.threads``."""
    common = {
        "steps": None,
        "epochs": None,
        "device": "cpu",
        "torch_threads": args.threads,
        "eval_every_steps": None,
    }
    if budget == "images":
        return config.replace(
            **common,
            images=int(amount),
            time_budget_s=None,
            eval_every_images=args.eval_every_images,
            eval_every_s=None,
        )
    return config.replace(
        **common,
        images=None,
        time_budget_s=float(amount),
        eval_every_images=None,
        eval_every_s=args.eval_every_s,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    configs = {name: load_config_file(path) for name, path in args.arm}
    arms = [
        SeedArm(name, budget, budgeted(config, budget, amount, args))
        for budget, amount in args.budget
        for name, config in configs.items()
    ]
    started = time.time()
    rows, loads = [], []
    for index in range(args.seeds):  # round-robin, one run at a time: its load read beside it
        seed = args.first_seed + index
        for arm in arms:
            before = os.getloadavg()[0]
            got, _ = retrain([arm], seeds=1, first_seed=seed - 1)
            rows += [{**row, "round": index + 1} for row in got]
            loads.append(
                {
                    "arm": arm.trial_id,
                    "budget": arm.arm,
                    "seed": seed,
                    "load_before": before,
                    "load_after": os.getloadavg()[0],
                    "ended_unix_s": time.time(),
                }
            )
    runs = pd.DataFrame(rows, columns=SEED_COLUMNS)
    return {
        "about": _about(args, started, loads),
        "budgets": {
            budget: _budget(runs, list(configs), budget, amount, args)
            for budget, amount in args.budget
        },
        "configs": {name: config.to_dict() for name, config in configs.items()},
        "loads": loads,
        "runs": runs.to_dict(orient="records"),
    }


def _about(args: argparse.Namespace, started: float, loads: list[dict[str, Any]]) -> dict[str, Any]:
    values = [v for row in loads for v in (row["load_before"], row["load_after"])]
    return {
        "what": "recommendations retrained at equal images and equal training seconds, "
        "seeds interleaved over arms and budgets",
        "arms": {name: str(path) for name, path in args.arm},
        "budgets": {budget: amount for budget, amount in args.budget},
        "eval_every_images": args.eval_every_images,
        "eval_every_s": args.eval_every_s,
        "seeds": list(range(args.first_seed, args.first_seed + args.seeds)),
        "threads": args.threads,
        "target_accuracy": args.target,
        "interval": SEED_ACCURACY_METHOD,
        "started_unix_s": started,
        "took_s": time.time() - started,
        "load_1min_range": [min(values), max(values)] if values else [],
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "note": args.note,
    }


def _budget(
    runs: pd.DataFrame, names: list[str], budget: str, amount: float, args: argparse.Namespace
) -> dict[str, Any]:
    arms = {name: _arm(runs, name, budget, args.target) for name in names}
    reference = names[0]
    for name in names[1:]:
        change = seed_accuracy_difference(
            _accuracies(runs, reference, budget),
            _accuracies(runs, name, budget),
            arms[reference]["val_images"],
        )
        arms[name]["minus_first"] = {
            "accuracy_points": 100 * change.value,
            "low": 100 * change.low,
            "high": 100 * change.high,
            "verdict": change.verdict,
        }
    return {"amount": amount, "unit": UNITS[budget], "arms": arms}


def _accuracies(runs: pd.DataFrame, name: str, budget: str) -> list[float]:
    final = _of(runs, name, budget)
    final = final[final["final"].astype(bool) & (final["status"] == "ok")]
    return final["val_accuracy"].astype(float).tolist()


def _of(runs: pd.DataFrame, name: str, budget: str) -> pd.DataFrame:
    return runs[(runs["trial_id"] == name) & (runs["arm"] == budget)]


def _arm(runs: pd.DataFrame, name: str, budget: str, target: float) -> dict[str, Any]:
    accuracy = seed_accuracy_of(runs, name, budget)
    mine = _of(runs, name, budget)
    final = mine[mine["final"].astype(bool)]
    seen = final["images_seen"].astype(float)
    per_seed = final["val_accuracy"].astype(float).tolist()
    to_target = {int(seed): _to_target(run, target) for seed, run in mine.groupby("seed")}
    seconds = [to_target[s][0] for s in sorted(to_target)]
    images = [to_target[s][1] for s in sorted(to_target)]
    return {
        "accuracy": accuracy.value,
        "accuracy_low": accuracy.low,
        "accuracy_high": accuracy.high,
        "val_images": accuracy.val_images,
        "accuracy_per_seed": per_seed,
        "accuracy_median": _median(per_seed),
        "status_per_seed": final["status"].tolist(),
        "images_seen_per_seed": seen.tolist(),
        "train_time_s_per_seed": final["train_time_s"].astype(float).tolist(),
        "images_per_training_second": float((seen / final["train_time_s"].astype(float)).median()),
        "seconds_to_target_per_seed": seconds,
        "images_to_target_per_seed": images,
        "seconds_to_target_median": _median(seconds),
        "images_to_target_median": _median(images),
    }


def _to_target(run: pd.DataFrame, target: float) -> tuple[float, float]:
    """(training seconds, images) at the run's first evaluation at or above ``target`` (NaN:
    never within the budget); the evaluations' spacing bounds the resolution."""
    reached = run[run["val_accuracy"].astype(float) >= target].sort_values("train_time_s")
    if reached.empty:
        return math.nan, math.nan
    first = reached.iloc[0]
    return float(first["train_time_s"]), float(first["images_seen"])


def _median(values: list[float]) -> float:
    """The median over the finite values; NaN (never reached) counts as the slowest, so a
    median stays NaN when most seeds never reached the target."""
    if not values:
        return math.nan
    ordered = sorted(values, key=lambda v: math.inf if math.isnan(v) else v)
    middle = ordered[len(ordered) // 2] if len(ordered) % 2 else math.nan
    if len(ordered) % 2 == 0:
        a, b = ordered[len(ordered) // 2 - 1], ordered[len(ordered) // 2]
        middle = (a + b) / 2 if not (math.isnan(a) or math.isnan(b)) else math.nan
    return float(middle)


_SHOWN = ("batch_size", "lr", "norm", "gn_groups", "amp", "channels_last")


def markdown(report: dict[str, Any]) -> str:
    about = report["about"]
    lines = [
        "# Recommendations at equal images and at equal training time (issue 47)",
        "",
        f"Arms: {_arms_text(report)}. Seeds {about['seeds']}, interleaved over arms and "
        f"budgets (one run at a time), {about['threads']} torch thread(s) per run, target "
        f"{about['target_accuracy']:.2f} accuracy, on {about['host']} ({about['cpus']} CPUs, "
        f"torch {about['torch']}); {about['took_s']:.0f} s in all; 1-minute load average "
        f"{_load_text(about)} during the runs. Accuracy: {about['interval']}; each arm against "
        "the first by tuner.stats.seed_accuracy_difference (inside the noise: a tie).",
        "",
    ]
    for budget, part in report["budgets"].items():
        lines += _budget_table(budget, part, about)
    lines += ["Each run's load (1-minute average before / after it):", ""]
    lines += [
        f"- {row['arm']} @ {row['budget']}, seed {row['seed']}: {row['load_before']:.2f} / "
        f"{row['load_after']:.2f}"
        for row in report["loads"]
    ]
    if about.get("note"):
        lines += ["", about["note"]]
    return "\n".join(lines) + "\n"


def _arms_text(report: dict[str, Any]) -> str:
    parts = []
    for name, config in report["configs"].items():
        shown = ", ".join(f"{k}={_short(config.get(k))}" for k in _SHOWN)
        parts.append(f"**{name}** ({shown})")
    return "; ".join(parts)


def _load_text(about: dict[str, Any]) -> str:
    low_high = about.get("load_1min_range") or []
    return f"{low_high[0]:.2f}-{low_high[1]:.2f}" if low_high else "not read"


def _budget_table(budget: str, part: dict[str, Any], about: dict[str, Any]) -> list[str]:
    target = f"{about['target_accuracy']:.2f}"
    lines = [
        f"## Equal {budget}: {part['amount']:,g} {part['unit']} per run",
        "",
        f"| arm | accuracy mean [95 %] | median (min-max) over seeds | vs first arm, points | "
        f"images seen (median) | images per training second | training seconds to {target}: "
        f"median (per seed) | images to {target}: median (per seed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, arm in part["arms"].items():
        per_seed = arm["accuracy_per_seed"]
        spread = f"{arm['accuracy_median']:.3f} ({min(per_seed):.3f}-{max(per_seed):.3f})"
        diff = arm.get("minus_first")
        vs = (
            "reference"
            if diff is None
            else (
                f"{diff['accuracy_points']:+.1f} [{diff['low']:+.1f} to {diff['high']:+.1f}], "
                f"{diff['verdict']}"
            )
        )
        lines.append(
            f"| {name} | {arm['accuracy']:.3f} [{arm['accuracy_low']:.3f}-"
            f"{arm['accuracy_high']:.3f}] | {spread} | {vs} | "
            f"{statistics.median(arm['images_seen_per_seed']):,.0f} | "
            f"{arm['images_per_training_second']:,.0f} | "
            f"{_num(arm['seconds_to_target_median'], '.1f')} "
            f"({_nums(arm['seconds_to_target_per_seed'], '.1f')}) | "
            f"{_num(arm['images_to_target_median'], ',.0f')} "
            f"({_nums(arm['images_to_target_per_seed'], ',.0f')}) |"
        )
    return [*lines, ""]


def _num(value: float, spec: str) -> str:
    return "never" if math.isnan(value) else f"{value:{spec}}"


def _nums(values: list[float], spec: str) -> str:
    return ", ".join(_num(v, spec) for v in values)


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def _arm_arg(text: str) -> tuple[str, Path]:
    name, path = _pair(text)
    return name, Path(path)


def _budget_arg(text: str) -> tuple[str, float]:
    kind, amount = _pair(text)
    if kind not in UNITS:
        raise argparse.ArgumentTypeError(f"budget {kind!r}: give images=N or seconds=S")
    return kind, float(amount)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--arm",
        type=_arm_arg,
        action="append",
        default=[],
        help="NAME=PATH of a run config (recommended_*.json); the first is the reference",
    )
    parser.add_argument(
        "--budget",
        type=_budget_arg,
        action="append",
        default=[],
        help="images=N or seconds=S (repeat for both)",
    )
    parser.add_argument("--eval-every-images", type=int, default=1600)
    parser.add_argument("--eval-every-s", type=float, default=2.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--target", type=float, default=0.8, help="accuracy to time each to")
    parser.add_argument("--note", default="", help="a paragraph the report prints at its end")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--render", action="store_true", help="only write the .md from the .json")
    args = parser.parse_args()
    if args.render:
        report = json.loads((args.out / "equal_time_pick.json").read_text())
        (args.out / "equal_time_pick.md").write_text(markdown(report))
        return
    if len(args.arm) < 2 or not args.budget:
        parser.error("give two or more --arm NAME=PATH and one or more --budget, or --render")
    report = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "equal_time_pick.json").write_text(json.dumps(report, indent=2, default=str))
    (args.out / "equal_time_pick.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
