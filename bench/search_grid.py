"""Measure, once, everything a search could observe on a small space: the replay's ground truth.

On the CPU, with the real engine (no Ray), for ``SPACE`` (24 training configs: batch size x norm
x AMP x base lr, on the vit_space CPU model):

- per training config (plain speed setting): its learning curve, one point per evaluation
  (step, val accuracy, images/s so far, training and wall seconds so far), and its peak memory;
- per speed key (batch size, norm, AMP) and per combination of the CPU speed knobs
  (set_to_none, channels_last, fused AdamW, DataLoader workers: 16 combinations): a short
  probe, exactly as the search's speed probes run it, repeated ``--repeats`` times,
  interleaved over the combinations (images/s, peak memory, wall and step seconds).

Accuracy does not depend on the speed knobs (they are accuracy-neutral: tuner.techniques), so a
(config, combination) point's accuracy is its config's. ``bench/search_replay.py`` replays
search strategies over this file with the real samplers and schedulers, without training.

    .venv/bin/python bench/search_grid.py              # ~15 min on 2 quiet CPU cores
    .venv/bin/python bench/search_grid.py --smoke-test # seconds: a 2-config grid, for CI
Writes bench/data/search_grid.json (or --out).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from tuner.config import TrainConfig
from tuner.engine import probe, train
from tuner.spaces import get_space
from tuner.techniques import knob
from tuner.workloads import MICRO_VIT

OUT = Path(__file__).resolve().parent / "data" / "search_grid.json"
# The main job's CPU workload, evaluated more often (every 20 steps: the halving rungs) and with
# no time limit, so a curve's steps do not depend on how busy the machine was.
WORKLOAD: dict[str, Any] = {
    **{k: v for k, v in get_space("vit_space").workloads["cpu"].items() if k != "time_budget_s"},
    "eval_every_steps": 20,
    "device": "cpu",
}
SPACE: dict[str, list[Any]] = {
    "batch_size": [32, 128],
    "norm": ["batch", "group"],
    "amp": ["off", "bf16"],
    "base_lr": [3e-4, 1e-3, 3e-3],
}
GN_GROUPS = 16
SPEED_KNOBS = ("set_to_none", "channels_last", "fused_adamw", "num_workers")
PROBE_STEPS = 5  # as the search's default --probe-steps


def training_configs(space: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(space)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*space.values())]


def to_config(
    point: dict[str, Any], workload: dict[str, Any], combo: dict[str, Any]
) -> TrainConfig:
    params = {**workload, "batch_size": point["batch_size"], "norm": point["norm"],
              "amp": point["amp"], "lr": point["base_lr"] * point["batch_size"] / 256}  # fmt: skip
    if point["norm"] == "group":
        params["gn_groups"] = GN_GROUPS
    for name, value in combo.items():
        params.update(knob(name).settings(value))
    return TrainConfig.from_params(params)


def combos() -> list[dict[str, Any]]:
    values = [[knob(k).off, knob(k).cpu[0]] for k in SPEED_KNOBS]
    return [dict(zip(SPEED_KNOBS, v, strict=True)) for v in itertools.product(*values)]


def curve(point: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    points: list[dict[str, Any]] = []

    def on_eval(progress: Any) -> None:
        r = progress.result
        points.append({"step": progress.step, "val_accuracy": r.val_accuracy,
                       "images_per_second": r.images_per_second, "train_time_s": r.train_time_s,
                       "wall_s": time.perf_counter() - started})  # fmt: skip

    result = train(to_config(point, workload, {}), on_eval=on_eval)
    return {"config": point, "status": result.status, "curve": points,
            "val_images": result.val_images, "peak_memory_bytes": result.peak_memory_bytes,
            "wall_s": time.perf_counter() - started}  # fmt: skip


def speed_table(keys: list[dict[str, Any]], workload: dict[str, Any], repeats: int) -> list:
    rows = []
    for key in keys:
        point = {**key, "base_lr": 1e-3}
        cells = [(c, to_config(point, workload, c).replace(warmup_steps=2)) for c in combos()]
        probe(cells[0][1], steps=PROBE_STEPS)  # discarded: the first build pays one-time costs
        measured: list[list[dict[str, Any]]] = [[] for _ in cells]
        for _ in range(repeats):
            for index, (_, config) in enumerate(cells):
                measured[index].append(_probe_row(config))
        rows += [{"key": key, "combo": c, "repeats": m}
                 for (c, _), m in zip(cells, measured, strict=True)]  # fmt: skip
        print(f"speed {key}: done", flush=True)
    return rows


def _probe_row(config: TrainConfig) -> dict[str, Any]:
    started = time.perf_counter()
    r = probe(config, steps=PROBE_STEPS)
    return {
        "status": r.status,
        "images_per_second": r.images_per_second,
        "peak_memory_bytes": r.peak_memory_bytes,
        "train_time_s": r.train_time_s,
        "wall_s": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="probe repeats per combination")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--smoke-test", action="store_true", help="a 2-config grid, seconds")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a trial's share of a 2-core machine (tuner.search.plan)
    space, workload = dict(SPACE), dict(WORKLOAD)
    if args.smoke_test:
        space = {"batch_size": [16], "norm": ["batch", "group"], "amp": ["off"], "base_lr": [1e-3]}
        workload.update(
            model_kwargs=MICRO_VIT["model_kwargs"],
            img_size=16,
            steps=8,
            eval_every_steps=4,
        )
    started = time.perf_counter()
    configs = training_configs(space)
    training = []
    for point in configs:
        training.append(curve(point, workload))
        print(f"train {point}: {training[-1]['status']}, "
              f"{training[-1]['curve'][-1]['val_accuracy']:.3f}", flush=True)  # fmt: skip
    keys: dict[str, dict[str, Any]] = {}
    for c in configs:
        key = {n: c[n] for n in ("batch_size", "norm", "amp")}
        keys.setdefault(json.dumps(key, sort_keys=True), key)
    repeats = 1 if args.smoke_test else args.repeats
    speed = speed_table(list(keys.values()), workload, repeats)
    about = {"workload": workload, "space": space, "gn_groups": GN_GROUPS,
             "speed_knobs": list(SPEED_KNOBS), "probe_steps": PROBE_STEPS,
             "torch": torch.__version__, "threads": torch.get_num_threads(),
             "machine": platform.platform(), "date": time.strftime("%Y-%m-%d"),
             "measure_s": time.perf_counter() - started}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"about": about, "training": training, "speed": speed}))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB) in "
          f"{about['measure_s']:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
