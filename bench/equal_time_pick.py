"""Two recommendations retrained for the same training seconds with several seeds, interleaved:
the accuracy each reaches, with intervals over the seeds and the validation sample.

Issue 47: main's search recommended by images/s at unequal budgets (a trial of batch 64 saw
6,400 images in its 100 steps, one of batch 256 20,736), so its accuracy axis measured the
budget. This retrains the recommendation of main before the change (``--before``, a
``recommended_*.json`` its report wrote) and the one after it (``--after``) for the same
``--seconds`` of training each (``time_budget_s``; steps and epochs off: the wall time is the
only budget), ``--seeds`` new seeds, round-robin (before seed 1, after seed 1, before seed 2,
...: a drift of a busy machine hits both alike), one torch thread per run as the trials ran.
Each run's curve is kept (accuracy at each evaluation against images and seconds), so the time
each takes to ``--target`` accuracy is read too. The retraining is the search's own
(:func:`tuner.compare.seeds.retrain`), the interval :func:`tuner.stats.seed_accuracy`.

    flock /work/helpers/measure.lock .venv/bin/python bench/equal_time_pick.py \\
        --before reports/.../recommended_images_per_second.json \\
        --after reports/.../recommended_val_accuracy.json --seconds 12 --seeds 3
Writes reports/benchmarks/equal_time_pick.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from tuner.compare.seeds import (
    PICK,
    SEED_COLUMNS,
    SeedArm,
    retrain,
    seed_accuracy_of,
    time_to_target,
)
from tuner.config import TrainConfig, load_config_file
from tuner.stats import SEED_ACCURACY_METHOD, seed_accuracy_difference

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "benchmarks"


def equal_time(config: TrainConfig, seconds: float, threads: int) -> TrainConfig:
    """``config`` with ``seconds`` of training as its only budget, on the CPU, ``threads``."""
    return config.replace(
        time_budget_s=seconds, steps=None, epochs=None, device="cpu", torch_threads=threads
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    arms = [
        SeedArm(name, PICK, equal_time(load_config_file(path), args.seconds, args.threads))
        for name, path in (("before", args.before), ("after", args.after))
    ]
    started = time.time()
    rows, info = retrain(arms, seeds=args.seeds, first_seed=args.first_seed - 1)
    runs = pd.DataFrame(rows, columns=SEED_COLUMNS)
    arms_out = {arm.trial_id: _arm(runs, arm, args) for arm in arms}
    final = runs[runs["final"].astype(bool)]
    images = int(statistics.median(final["val_images"])) if len(final) else 0
    change = seed_accuracy_difference(
        _accuracies(runs, "before"), _accuracies(runs, "after"), images
    )
    return {
        "about": {
            "what": "two recommendations retrained for equal training seconds, seeds interleaved",
            "seconds": args.seconds,
            "seeds": info["seeds"],
            "threads": args.threads,
            "target_accuracy": args.target,
            "interval": SEED_ACCURACY_METHOD,
            "started_unix_s": started,
            "took_s": info["seconds"],
            "host": platform.node(),
            "cpus": torch.get_num_threads(),
            "torch": torch.__version__,
            "before_file": str(args.before),
            "after_file": str(args.after),
            "note": args.note,
        },
        "arms": arms_out,
        "after_minus_before": {
            "accuracy_points": 100 * change.value,
            "low": 100 * change.low,
            "high": 100 * change.high,
            "verdict": change.verdict,
        },
        "runs": final.drop(columns=["final"]).to_dict(orient="records"),
    }


def _accuracies(runs: pd.DataFrame, name: str) -> list[float]:
    final = runs[(runs["trial_id"] == name) & runs["final"].astype(bool) & (runs["status"] == "ok")]
    return final["val_accuracy"].astype(float).tolist()


def _arm(runs: pd.DataFrame, arm: SeedArm, args: argparse.Namespace) -> dict[str, Any]:
    accuracy = seed_accuracy_of(runs, arm.trial_id)
    final = runs[(runs["trial_id"] == arm.trial_id) & runs["final"].astype(bool)]
    to_target = time_to_target(runs, arm.trial_id, PICK, args.target)
    seen = final["images_seen"].astype(float)
    return {
        "config": {k: v for k, v in arm.config.to_dict().items() if k in _SHOWN},
        "accuracy": accuracy.value,
        "accuracy_low": accuracy.low,
        "accuracy_high": accuracy.high,
        "accuracy_per_seed": final["val_accuracy"].astype(float).tolist(),
        "seed_sd": accuracy.seed_sd,
        "val_images": accuracy.val_images,
        "images_seen_median": float(seen.median()) if len(seen) else math.nan,
        "images_per_training_second": float((seen / final["train_time_s"].astype(float)).median()),
        "seconds_to_target_per_seed": [to_target[s] for s in sorted(to_target)],
        "cut_by_time_budget": bool(final["cut"].astype(bool).all()),
    }


_SHOWN = ("model", "batch_size", "lr", "norm", "gn_groups", "amp", "channels_last", "img_size")


def markdown(report: dict[str, Any]) -> str:
    about, arms, diff = report["about"], report["arms"], report["after_minus_before"]
    lines = [
        "# Two recommendations at equal training time",
        "",
        f"Each retrained for {about['seconds']:g} s of training (`time_budget_s`; evaluation "
        f"excluded), seeds {about['seeds']}, interleaved (before, after, before, ...), "
        f"{about['threads']} torch thread(s) per run, on {about['host']} (torch "
        f"{about['torch']}); {about['took_s']:.0f} s in all. Accuracy: {about['interval']}.",
        "",
        "| arm | config | accuracy [95 %] | per seed | images seen (median) | images per "
        f"training second | seconds to {about['target_accuracy']:.2f} per seed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, arm in arms.items():
        config = ", ".join(f"{k}={_short(v)}" for k, v in arm["config"].items() if k != "model")
        per_seed = ", ".join(f"{a:.3f}" for a in arm["accuracy_per_seed"])
        to_target = ", ".join(
            "never" if math.isnan(s) else f"{s:.1f}" for s in arm["seconds_to_target_per_seed"]
        )
        lines.append(
            f"| {name} | {config} | {arm['accuracy']:.3f} [{arm['accuracy_low']:.3f}-"
            f"{arm['accuracy_high']:.3f}] | {per_seed} | {arm['images_seen_median']:,.0f} | "
            f"{arm['images_per_training_second']:,.0f} | {to_target} |"
        )
    lines += [
        "",
        f"After minus before: {diff['accuracy_points']:+.1f} accuracy points "
        f"[{diff['low']:+.1f} to {diff['high']:+.1f}], {diff['verdict']} "
        "(tuner.stats.seed_accuracy_difference: the two arms' intervals added in quadrature).",
        "",
        f"Arms: before = `{about['before_file']}`, after = `{about['after_file']}`.",
    ]
    if about.get("note"):
        lines += ["", about["note"]]
    return "\n".join(lines) + "\n"


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="main's recommended config")
    parser.add_argument("--after", type=Path, help="the new rule's pick")
    parser.add_argument("--seconds", type=float, default=12.0, help="training seconds per run")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--target", type=float, default=0.8, help="accuracy to time each to")
    parser.add_argument("--note", default="", help="a line the report prints under the table")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--render", action="store_true", help="only write the .md from the .json")
    args = parser.parse_args()
    if args.render:
        report = json.loads((args.out / "equal_time_pick.json").read_text())
        (args.out / "equal_time_pick.md").write_text(markdown(report))
        return
    if args.before is None or args.after is None:
        parser.error("give --before and --after (recommended_*.json files), or --render")
    report = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "equal_time_pick.json").write_text(json.dumps(report, indent=2, default=str))
    (args.out / "equal_time_pick.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
