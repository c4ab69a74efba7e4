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

    .venv/bin/python bench/search_grid.py                # the vit grid: ~6 min on 2 quiet cores
    .venv/bin/python bench/search_grid.py --grid resnet  # the resnet grid: ~20 min
    .venv/bin/python bench/search_grid.py --smoke-test   # seconds: a 2-config grid, for CI
Writes bench/data/search_grid.json (vit) or search_grid_<grid>.json (or --out).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tuner.config import TrainConfig
from tuner.engine import short_run, train
from tuner.spaces import get_space
from tuner.techniques import knob
from tuner.workloads import MICRO_VIT

DATA = Path(__file__).resolve().parent / "data"
EVALUATIONS = 5  # per training run: the halving rungs


@dataclass(frozen=True)
class GridSpec:
    """A grid: the workload its configs train, the space and how long each config trains."""

    workload: dict[str, Any]
    space: dict[str, list[Any]]
    # Steps per config: a fixed step count (``steps``) or a fixed number of training images
    # (``images // batch_size``), so a smaller batch takes more, smaller updates.
    images: int | None = None
    gn_groups: int = 16  # GroupNorm's groups: must divide every norm layer's channels

    def steps(self, batch_size: int) -> int:
        return self.images // batch_size if self.images else self.workload["steps"]


def _no_time_limit(space: str) -> dict[str, Any]:
    # No time limit, so a curve's steps do not depend on how busy the machine was.
    cpu = get_space(space).workloads["cpu"]
    return {**{k: v for k, v in cpu.items() if k != "time_budget_s"}, "device": "cpu"}


GRIDS: dict[str, GridSpec] = {
    # The main job's CPU model for 100 steps: the larger batch sees 4x the images, so it is the
    # most accurate (and, with AMP under the memory budget, on the front).
    "vit": GridSpec(
        _no_time_limit("vit_space"),
        {
            "batch_size": [32, 128],
            "norm": ["batch", "group"],
            "amp": ["off", "bf16"],
            "base_lr": [3e-4, 1e-3, 3e-3],
        },
    ),
    # resnet_space's CPU model on a fixed number of images (120 steps at batch 32): the largest
    # batch is the fastest and the least accurate; the most accurate configs are small batches.
    "resnet": GridSpec(
        _no_time_limit("resnet_space"),
        {
            "batch_size": [32, 64, 128],
            "norm": ["batch", "group"],
            "amp": ["off", "bf16"],
            "base_lr": [1e-3, 3e-3, 1e-2],
        },
        images=3840,
        gn_groups=8,  # resnet10t's stem has 24 channels
    ),
}
SPEED_KNOBS = ("set_to_none", "channels_last", "fused_adamw", "num_workers")
PROBE_STEPS = 5  # as the search's default --probe-steps


def training_configs(space: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(space)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*space.values())]


def to_config(point: dict[str, Any], spec: GridSpec, combo: dict[str, Any]) -> TrainConfig:
    steps = spec.steps(point["batch_size"])
    params = {**spec.workload, "batch_size": point["batch_size"], "norm": point["norm"],
              "amp": point["amp"], "lr": point["base_lr"] * point["batch_size"] / 256,
              "steps": steps, "eval_every_steps": steps // EVALUATIONS}  # fmt: skip
    if point["norm"] == "group":
        params["gn_groups"] = spec.gn_groups
    for name, value in combo.items():
        params.update(knob(name).settings(value))
    return TrainConfig.from_params(params)


def combos() -> list[dict[str, Any]]:
    values = [[knob(k).off, knob(k).cpu[0]] for k in SPEED_KNOBS]
    return [dict(zip(SPEED_KNOBS, v, strict=True)) for v in itertools.product(*values)]


def curve(point: dict[str, Any], spec: GridSpec) -> dict[str, Any]:
    started = time.perf_counter()
    points: list[dict[str, Any]] = []

    def on_eval(progress: Any) -> None:
        r = progress.result
        points.append({"step": progress.step, "val_accuracy": r.val_accuracy,
                       "images_per_second": r.images_per_second, "train_time_s": r.train_time_s,
                       "wall_s": time.perf_counter() - started})  # fmt: skip

    result = train(to_config(point, spec, {}), on_eval=on_eval)
    return {"config": point, "status": result.status, "curve": points,
            "val_images": result.val_images, "peak_memory_bytes": result.peak_memory_bytes,
            "wall_s": time.perf_counter() - started}  # fmt: skip


def speed_table(keys: list[dict[str, Any]], spec: GridSpec, repeats: int) -> list:
    rows = []
    for key in keys:
        lrs = spec.space["base_lr"]
        point = {**key, "base_lr": lrs[len(lrs) // 2]}  # the middle lr: speed does not depend on it
        cells = [(c, to_config(point, spec, c).replace(warmup_steps=2)) for c in combos()]
        short_run(cells[0][1], steps=PROBE_STEPS)  # discarded: the first build pays one-time costs
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
    r = short_run(config, steps=PROBE_STEPS)
    return {
        "status": r.status,
        "images_per_second": r.images_per_second,
        "peak_memory_bytes": r.peak_memory_bytes,
        "train_time_s": r.train_time_s,
        "wall_s": time.perf_counter() - started,
    }


def grid_path(name: str) -> Path:
    """Where grid ``name`` is kept (the first grid keeps its first name)."""
    return DATA / ("search_grid.json" if name == "vit" else f"search_grid_{name}.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=sorted(GRIDS), default="vit")
    parser.add_argument("--repeats", type=int, default=3, help="probe repeats per combination")
    parser.add_argument("--out", type=Path, default=None, help="default: bench/data/")
    parser.add_argument("--smoke-test", action="store_true", help="a 2-config grid, seconds")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a trial's share of a 2-core machine (tuner.tune.plan)
    spec = GRIDS[args.grid]
    if args.smoke_test:
        spec = GridSpec(
            {**spec.workload, **MICRO_VIT, "img_size": 16, "steps": 8},
            {"batch_size": [16], "norm": ["batch", "group"], "amp": ["off"], "base_lr": [1e-3]},
        )
    out = args.out or grid_path(args.grid)
    started = time.perf_counter()
    configs = training_configs(spec.space)
    training = []
    for point in configs:
        training.append(curve(point, spec))
        print(f"train {point}: {training[-1]['status']}, "
              f"{training[-1]['curve'][-1]['val_accuracy']:.3f}", flush=True)  # fmt: skip
    keys: dict[str, dict[str, Any]] = {}
    for c in configs:
        key = {n: c[n] for n in ("batch_size", "norm", "amp")}
        keys.setdefault(json.dumps(key, sort_keys=True), key)
    repeats = 1 if args.smoke_test else args.repeats
    speed = speed_table(list(keys.values()), spec, repeats)
    about = {"grid": args.grid, "workload": spec.workload, "space": spec.space,
             "images": spec.images, "gn_groups": spec.gn_groups,
             "speed_knobs": list(SPEED_KNOBS), "probe_steps": PROBE_STEPS,
             "torch": torch.__version__, "threads": torch.get_num_threads(),
             "machine": platform.platform(), "date": time.strftime("%Y-%m-%d"),
             "measure_s": time.perf_counter() - started}  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"about": about, "training": training, "speed": speed}))
    print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB) in {about['measure_s']:.0f} s")


if __name__ == "__main__":
    main()
