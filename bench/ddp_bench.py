"""Data-parallel costs on CPU: a 2-worker trial's start-up, and scaling from 1 to 2 workers.

- Start-up: the seconds from ``TorchTrainer.fit()`` (Ray Train V2's own trainer, gloo, 1 CPU
  per worker; data-parallel trials ran on it before their warm ranks, tuner.tune.rank_pool,
  which bench/data_parallel_overhead.py measures) to rank 0 entering the training function:
  the worker group's placement, processes, imports and process group; and the whole fit of an
  empty function.
- Scaling: the embedded workload (``vit_space``'s CPU workload on the digits) trained by
  ``python -m tuner train`` (1 worker) and ``torchrun --nproc-per-node 2 -m tuner train``
  (2 workers, gloo), one thread per worker, the two interleaved (the order alternates per
  repeat); the engine's steady-state images/s (global), the paired ratio 2 workers / 1 worker
  with its 95 % interval, and the scaling efficiency (that ratio over 2). The per-worker batch
  is the same, so 2 workers train at twice the global batch (weak scaling).

    .venv/bin/python bench/ddp_bench.py --smoke     # a quick check; writes nothing
    .venv/bin/python bench/ddp_bench.py             # on a quiet machine: writes the report

Writes reports/benchmarks/ddp_cpu.{md,json} (not with --smoke).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "benchmarks"
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved pairs (default 5)")
    parser.add_argument("--startups", type=int, default=5, help="2-worker starts (default 5)")
    parser.add_argument("--steps", type=int, default=60, help="training steps per run")
    parser.add_argument("--smoke", action="store_true", help="2 pairs, 1 start, 12 steps; no files")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.startups, args.steps = 2, 1, 12
    startup = measure_startup(args.startups)
    scaling = measure_scaling(args.repeats, args.steps)
    result = {
        "startup": startup,
        "scaling": scaling,
        "command": " ".join(sys.argv),
        "load_average_1min_end": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    text = markdown(result)
    print(text)
    if not args.smoke:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "ddp_cpu.json").write_text(json.dumps(result, indent=2) + "\n")
        (OUT / "ddp_cpu.md").write_text(text)


# ---- start-up of a 2-worker group --------------------------------------------------------------


def _entered(config: dict[str, Any]) -> None:
    import ray.train

    if ray.train.get_context().get_world_rank() == 0:
        Path(config["stamp"]).write_text(repr(time.time()))


def measure_startup(starts: int) -> dict[str, Any]:
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    from tuner.stats import median_interval
    from tuner.tune.cluster import connect, shutdown

    connect(num_cpus=2)
    to_entry, fits = [], []
    storage = tempfile.mkdtemp(prefix="ddp-bench-")
    try:
        for start in range(starts):
            stamp = Path(storage) / f"entered{start}"
            trainer = TorchTrainer(
                _entered,
                train_loop_config={"stamp": str(stamp)},
                scaling_config=ray.train.ScalingConfig(
                    num_workers=2, resources_per_worker={"CPU": 1}, placement_strategy="PACK"
                ),
                torch_config=TorchConfig(backend="gloo"),
                run_config=ray.train.RunConfig(
                    name=f"start{start}",
                    storage_path=storage,
                    logging_config=ray.train.LoggingConfig(log_level="WARNING"),
                ),
            )
            began = time.time()
            trainer.fit()
            fits.append(time.time() - began)
            to_entry.append(float(stamp.read_text()) - began)
    finally:
        shutdown()
        shutil.rmtree(storage, ignore_errors=True)
    return {
        "starts": starts,
        "to_first_step_s": to_entry,
        "to_first_step": _estimate(median_interval(to_entry)),
        "fit_s": fits,
        "fit": _estimate(median_interval(fits)),
    }


# ---- 1 -> 2 workers on the embedded workload ---------------------------------------------------


def _workload_flags(steps: int) -> list[str]:
    from tuner.spaces import get_space

    workload = get_space("vit_space").workloads["cpu"]
    return [
        "--model", workload["model"],
        "--model-kwargs", json.dumps(workload["model_kwargs"]),
        "--data", workload["data"],
        "--img-size", str(workload["img_size"]),
        "--steps", str(steps),
        "--warmup-steps", str(workload["warmup_steps"]),
        "--max-eval-batches", "1",
        "--json",
    ]  # fmt: skip


def _train(workers: int, steps: int) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    launcher = [sys.executable] if workers == 1 else [TORCHRUN, f"--nproc-per-node={workers}"]
    command = [*launcher, "-m", "tuner", "train", *_workload_flags(steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT, check=True)
    line = next(ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("{"))
    result = json.loads(line)
    if result.get("world_size") != workers or result.get("status") != "ok":
        raise RuntimeError(f"{workers}-worker run: {result.get('status')} {result.get('error')}")
    return {k: result.get(k) for k in ("images_per_second", "world_size", "global_batch_size")}


def measure_scaling(repeats: int, steps: int) -> dict[str, Any]:
    from tuner.stats import median_interval, paired_ratio

    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for repeat in range(repeats):
        for workers in (1, 2) if repeat % 2 == 0 else (2, 1):
            runs[workers].append(_train(workers, steps))
    one = [r["images_per_second"] for r in runs[1]]
    two = [r["images_per_second"] for r in runs[2]]
    ratio = paired_ratio(one, two)
    return {
        "repeats": repeats,
        "steps": steps,
        "runs": runs,
        "images_per_second": {
            "1": _estimate(median_interval(one)),
            "2": _estimate(median_interval(two)),
        },
        "ratio_2_over_1": {"value": ratio.value, "low": ratio.low, "high": ratio.high},
        "efficiency": {"value": ratio.value / 2, "low": ratio.low / 2, "high": ratio.high / 2},
    }


def _estimate(estimate: Any) -> dict[str, float]:
    return {"median": estimate.median, "low": estimate.low, "high": estimate.high}


def markdown(result: dict[str, Any]) -> str:
    start, scale = result["startup"], result["scaling"]
    ips = scale["images_per_second"]

    def show(e: dict[str, float], spec: str = ".1f") -> str:
        if e["low"] != e["low"]:  # NaN: one value, no interval
            return f"{e['median']:{spec}} (n=1)"
        return f"{e['median']:{spec}} [{e['low']:{spec}}–{e['high']:{spec}}]"

    eff = scale["efficiency"]
    return "\n".join(
        [
            "# Data-parallel trials on CPU (gloo, one thread per worker)",
            "",
            f"`{result['command']}`; {result['cpus']} CPUs, 1-min load average at the end "
            f"{result['load_average_1min_end']:.2f}. Medians [95 % intervals; [min–max] "
            "below 6 values].",
            "",
            f"## Start-up of a 2-worker group ({start['starts']} starts)",
            "",
            f"- fit() to rank 0's first line: {show(start['to_first_step'])} s",
            f"- whole fit() of an empty function: {show(start['fit'])} s",
            "",
            f"## 1 -> 2 workers, embedded workload ({scale['repeats']} interleaved pairs, "
            f"{scale['steps']} steps)",
            "",
            "| workers | images/s (global) |",
            "|---|---|",
            f"| 1 | {show(ips['1'])} |",
            f"| 2 | {show(ips['2'])} |",
            "",
            f"Scaling efficiency (2 workers / (2 x 1 worker), paired): "
            f"{eff['value']:.2f} [{eff['low']:.2f}–{eff['high']:.2f}]",
            "",
        ]
    )


if __name__ == "__main__":
    main()
