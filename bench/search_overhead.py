"""Where a search's wall time goes: training steps vs everything else, and the gap between trials.

Runs the main job (``python -m tuner search vit_space`` on the CPU workload, in a temporary
folder) or reads a finished experiment folder, and reports:

- the share of the search's wall time (``Tuner.fit``, from the experiment metadata) spent inside
  training steps (every trial's ``trial_train_time_s``: its speed probes' and its run's steps);
- per pair of consecutive trials (concurrency 1), the time from one trial's last report to the
  next trial's first training step (its first probe step, or its run's first step);
- the whole command's wall time, with the parts after the search (re-measurement, technique
  effects, report): their share of the command, and the technique effects' intervals (the
  median over arms of a ratio interval's width, high / low) and how each measurement ended.

    .venv/bin/python bench/search_overhead.py                      # runs the main job (~5 min)
    .venv/bin/python bench/search_overhead.py --keep /tmp/main-job  # ... and keeps its folders
    .venv/bin/python bench/search_overhead.py --experiment experiments/vit_space-...
Writes reports/benchmarks/search_overhead.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "benchmarks"
GAP_TARGET_S = 1.0
SHARE_TARGET = 0.85


def run_main_job(folder: Path, name: str) -> tuple[Path, float]:
    """The README's main command (named, so the folder is known), timed from outside."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "tuner", "search", "vit_space", "--name", name]
    # A first search on the machine, as on a fresh clone: no speed probes remembered from others.
    env = {**os.environ, "TUNER_CACHE_DIR": str(folder / "cache")}
    subprocess.run(command, cwd=folder, check=True, env=env)
    return folder / "experiments" / name, time.perf_counter() - started


def last_reports(experiment: Path) -> list[dict[str, Any]]:
    rows = []
    for result in sorted(experiment.glob("*/result.json")):
        lines = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        if lines:
            rows.append(lines[-1])
    return rows


def analyse(experiment: Path, command_s: float | None) -> dict[str, Any]:
    meta = json.loads((experiment / "tuner_experiment.json").read_text())
    trials = sorted(last_reports(experiment), key=lambda r: r["trial_first_step_unix_s"])
    training = sum(r["trial_train_time_s"] for r in trials)
    gaps = [b["trial_first_step_unix_s"] - a["reported_unix_s"] for a, b in pairwise(trials)]
    return {
        "trials": len(trials),
        "fit_time_s": meta["fit_time_s"],
        "trial_train_time_s": training,
        "training_share": training / meta["fit_time_s"],
        "probe_seconds": sum(r["speed_probe_time_s"] for r in trials),
        "gaps_s": gaps,
        "gap_median_s": statistics.median(gaps) if gaps else None,
        "gap_max_s": max(gaps) if gaps else None,
        "command_seconds": command_s,
        **trust_figures(experiment, meta, command_s),
        "command": " ".join(sys.argv),
        "load_average_1min_end": os.getloadavg()[0],
        "environment": meta.get("environment", {}),
        "per_trial": [
            {
                k: r.get(k)
                for k in (
                    "trial_id",
                    "phase",
                    "final",
                    "steps",
                    "trial_train_time_s",
                    "engine_time_s",
                    "speed_source",
                    "speed_probe_time_s",
                )
            }
            for r in trials
        ],
    }


def trust_figures(experiment: Path, meta: dict[str, Any], command_s: float | None) -> dict:
    """Re-measurement and effects: their time, how they ended, the effects' interval widths."""
    import pandas as pd

    from tuner.compare import summarize

    out: dict[str, Any] = {}
    for step in ("remeasure", "effects"):
        info = meta.get(step) or {}
        for key in ("seconds", "repeats_done", "stopped"):
            out[f"{step}_{key}"] = info.get(key)
    if out["remeasure_seconds"] is None:  # an experiment from before the record: file times
        out.update(_from_file_times(experiment))
    if command_s:
        trust = sum(float(out.get(f"{step}_seconds") or 0) for step in ("remeasure", "effects"))
        out["trust_s"] = trust or None
        out["trust_share"] = trust / command_s if trust else None
        out["after_trials_s"] = command_s - meta["fit_time_s"]  # Ray start/stop, report too
        out["after_trials_share"] = out["after_trials_s"] / command_s
    effects = experiment / "effects.csv"
    if effects.exists():
        key = "throughput_ratio_vs_reference"
        summary = summarize(pd.read_csv(effects)).dropna(subset=[f"{key}_low", f"{key}_high"])
        widths = (summary[f"{key}_high"] / summary[f"{key}_low"]).tolist()
        out["effect_arms"] = len(widths)
        out["effect_width_median"] = statistics.median(widths) if widths else None
        spans = (summary[f"{key}_high"] - summary[f"{key}_low"]).tolist()
        out["effect_span_median"] = statistics.median(spans) if spans else None
        out["effect_intervals"] = [
            f"{r['arm']}: {r[key]:.2f}x [{r[f'{key}_low']:.2f}-{r[f'{key}_high']:.2f}]"
            for _, r in summary.iterrows()
        ]
    return out


def _from_file_times(experiment: Path) -> dict[str, Any]:
    """Re-measurement: from the last trial report to remeasure.csv's write; effects: from
    there to effects.csv's (each includes a read of the folder: slightly long)."""
    last = max((r["reported_unix_s"] for r in last_reports(experiment)), default=None)
    remeasure, effects = experiment / "remeasure.csv", experiment / "effects.csv"
    if last is None or not remeasure.exists() or not effects.exists():
        return {}
    written = remeasure.stat().st_mtime
    return {
        "remeasure_seconds": written - last,
        "effects_seconds": effects.stat().st_mtime - written,
        "remeasure_stopped": "(file times)",
        "effects_stopped": "(file times)",
    }


def to_markdown(result: dict[str, Any]) -> str:
    env = result["environment"]
    gaps = ", ".join(f"{g:.2f}" for g in result["gaps_s"])
    command = f"{result['command_seconds']:.0f} s" if result["command_seconds"] else "n/a"
    return "\n".join([
        "# Search overhead: the main job on a CPU",
        "",
        f"`python -m tuner search vit_space` ({result['trials']} trials, concurrency 1), "
        f"torch {env.get('torch')}, ray {env.get('ray')}, {env.get('platform')}.",
        "",
        "| measure | value | goal |",
        "|---|---|---|",
        f"| search wall time (Tuner.fit) | {result['fit_time_s']:.1f} s | |",
        f"| inside training steps (runs and speed probes) | {result['trial_train_time_s']:.1f} s "
        "| |",
        f"| share of the search in training steps | {result['training_share']:.1%} | "
        f">= {SHARE_TARGET:.0%} |",
        f"| of which speed probes (wall) | {result['probe_seconds']:.1f} s | |",
        f"| gap between trials, median | {result['gap_median_s']:.2f} s | <= {GAP_TARGET_S} s |",
        f"| gap between trials, max | {result['gap_max_s']:.2f} s | |",
        f"| the whole command (search, re-measurement, effects, report) | {command} | |",
        *_trust_rows(result),
        "",
        f"Gaps, in order (s): {gaps}.",
        "",
        "Technique effects (ratio vs the recommended config, 95 % interval): "
        + "; ".join(result.get("effect_intervals") or ["none"]) + ".",
        "",
        f"Command: `{result['command']}`; 1-minute load average at the end "
        f"{result['load_average_1min_end']:.1f} on {os.cpu_count()} cores"
        + (" (above the core count: other work shared the machine and the shares are "
           "pessimistic)." if result["load_average_1min_end"] > (os.cpu_count() or 1) else "."),
        "",
    ])  # fmt: skip


def _trust_rows(result: dict[str, Any]) -> list[str]:
    def seconds(step: str) -> str:
        value = result.get(f"{step}_seconds")
        rounds, stopped = result.get(f"{step}_repeats_done"), result.get(f"{step}_stopped")
        return "n/a" if value is None else f"{value:.0f} s, {rounds} rounds, ended by {stopped}"

    def percent(key: str) -> str:
        value = result.get(key)
        return "n/a" if value is None else f"{value:.1%}"

    width, span = result.get("effect_width_median"), result.get("effect_span_median")
    return [
        f"| re-measurement | {seconds('remeasure')} | |",
        f"| technique effects | {seconds('effects')} | |",
        f"| re-measurement and effects, share of the command | {percent('trust_share')} | <= 25% |",
        "| everything after the trials (also the report, Ray's stop), share of the command "
        f"| {percent('after_trials_share')} | |",
        "| technique effects: median interval width (high / low) over "
        f"{result.get('effect_arms', 0)} arms | {'n/a' if width is None else f'{width:.2f}'} | |",
        "| technique effects: median interval width, high - low | "
        f"{'n/a' if span is None else f'{span:.2f}'} | |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", type=Path, help="analyse this folder instead of running")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep what it writes")
    parser.add_argument("--name", default="overhead", help="the run's experiment name")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.experiment:
        result = analyse(args.experiment, None)
    elif args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = analyse(*run_main_job(args.keep, args.name))
    else:
        with tempfile.TemporaryDirectory() as folder:
            result = analyse(*run_main_job(Path(folder), args.name))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "search_overhead.json").write_text(json.dumps(result, indent=1))
    (args.out / "search_overhead.md").write_text(to_markdown(result))
    print(to_markdown(result))


if __name__ == "__main__":
    main()
