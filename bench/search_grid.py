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
    .venv/bin/python bench/search_grid.py --reuse-speed bench/data/search_grid.json  # curves only
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
EVALUATIONS = 5  # per training run, by default: the halving rungs


@dataclass(frozen=True)
class GridSpec:
    """A grid: the workload its configs train, the space, and the images each config trains
    (every batch size the same images, within one batch, evaluated ``evaluations`` times at
    equal images: the search's budget unit since issue 47, so the replay's halving rungs compare
    equal images too)."""

    workload: dict[str, Any]
    space: dict[str, list[Any]]
    images: int
    evaluations: int = EVALUATIONS
    gn_groups: int = 16  # GroupNorm's groups: must divide every norm layer's channels

    def steps(self, batch_size: int) -> int:
        """The steps ``images`` take at ``batch_size`` (rounded up, as TrainConfig does)."""
        return -(-self.images // batch_size)


# The workload's own budget and cadence give way to the grid's (images, evaluations).
_BUDGET_KEYS = ("epochs", "images", "steps", "time_budget_s")
_CADENCE_KEYS = ("eval_every_steps", "eval_every_images", "eval_every_s")


def _no_time_limit(space: str) -> dict[str, Any]:
    # No time limit, so a curve's length does not depend on how busy the machine was.
    cpu = get_space(space).workloads["cpu"]
    dropped = (*_BUDGET_KEYS, *_CADENCE_KEYS)
    return {**{k: v for k, v in cpu.items() if k not in dropped}, "device": "cpu"}


def _cpu(space: str, key: str) -> Any:
    return get_space(space).workloads["cpu"][key]


GRIDS: dict[str, GridSpec] = {
    # The main job's CPU model on the main job's budget: vit_space's 6,400 images per trial,
    # evaluated every 1,600 (4 points), whatever the batch size. (Until issue 47 it was 100
    # steps, so the larger batch saw 4x the images and was the most accurate.)
    "vit": GridSpec(
        _no_time_limit("vit_space"),
        {
            "batch_size": [32, 128],
            "norm": ["batch", "group"],
            "amp": ["off", "bf16"],
            "base_lr": [3e-4, 1e-3, 3e-3],
        },
        images=_cpu("vit_space", "images"),
        evaluations=_cpu("vit_space", "images") // _cpu("vit_space", "eval_every_images"),
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
    params = {**spec.workload, "batch_size": point["batch_size"], "norm": point["norm"],
              "amp": point["amp"], "lr": point["base_lr"] * point["batch_size"] / 256,
              "images": spec.images,
              "eval_every_images": spec.images // spec.evaluations}  # fmt: skip
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
        points.append({"step": progress.step, "images_seen": r.images_seen,
                       "val_accuracy": r.val_accuracy,
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
    parser.add_argument(
        "--reuse-speed",
        type=Path,
        default=None,
        help="take the speed table from this earlier grid of the same space (the probes run a "
        "few steps, whatever the budget: only the learning curves depend on it)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # a trial's share of a 2-core machine (tuner.tune.plan)
    spec = GRIDS[args.grid]
    if args.smoke_test:
        spec = GridSpec(
            {**spec.workload, **MICRO_VIT, "img_size": 16},
            {"batch_size": [16], "norm": ["batch", "group"], "amp": ["off"], "base_lr": [1e-3]},
            images=128,
            evaluations=2,
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
    if args.reuse_speed:
        speed, speed_from = _reused_speed(args.reuse_speed, list(keys.values())), args.reuse_speed
    else:
        speed, speed_from = speed_table(list(keys.values()), spec, repeats), None
    about = {"grid": args.grid, "workload": spec.workload, "space": spec.space,
             "images": spec.images, "evaluations": spec.evaluations, "gn_groups": spec.gn_groups,
             "speed_knobs": list(SPEED_KNOBS), "probe_steps": PROBE_STEPS,
             "torch": torch.__version__, "threads": torch.get_num_threads(),
             "machine": platform.platform(), "date": time.strftime("%Y-%m-%d"),
             "measure_s": time.perf_counter() - started}  # fmt: skip
    if speed_from is not None:
        earlier = json.loads(speed_from.read_text())["about"]
        about["speed_from"] = {"file": speed_from.name, "date": earlier.get("date"),
                               "machine": earlier.get("machine")}  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"about": about, "training": training, "speed": speed}))
    print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB) in {about['measure_s']:.0f} s")


def _reused_speed(path: Path, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The speed rows of an earlier grid, every key of this one's present (else it is not the
    same space: measure it with the probes instead)."""
    rows = json.loads(path.read_text())["speed"]
    have = {json.dumps(r["key"], sort_keys=True) for r in rows}
    missing = [k for k in keys if json.dumps(k, sort_keys=True) not in have]
    if missing:
        raise SystemExit(f"{path} has no speed rows for {missing}: run without --reuse-speed")
    return rows


if __name__ == "__main__":
    main()
