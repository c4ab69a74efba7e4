"""The engine benchmark (``tuner bench``): the technique ladder's short runs, interleaved, each
rung a paired ratio; and model FLOPs utilization (3 x the forward FLOPs that
``torch.utils.flop_counter`` counts, x images/s, over the dense matmul rate timed in the run).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import torch

from tuner.compare import plan_ladder, run_interleaved, summarize
from tuner.config import TrainConfig
from tuner.engine import short_run
from tuner.engine.build import resolve_device
from tuner.engine.data import build_data
from tuner.engine.meters import environment, synchronize
from tuner.engine.model import build_model
from tuner.usercode import is_ref
from tuner.workloads import workload as reference

__all__ = ["benchmark_config", "run_benchmark"]


def benchmark_config(
    workload: dict[str, Any] | None, *, steps: int, warmup_steps: int
) -> TrainConfig:
    """The device's bench workload, ``workload`` over it, as a step-budget run (the plain loop)."""
    device = resolve_device((workload or {}).get("device", "auto"))
    params = {**reference("bench", cuda=device.type == "cuda"), **(workload or {})}
    return TrainConfig.from_params(
        {**params, "steps": steps, "images": None, "epochs": None, "warmup_steps": warmup_steps}
    )


def _forward_flops(config: TrainConfig, device: torch.device) -> float:
    """FLOPs of one image's forward pass, counted by torch."""
    from torch.utils.flop_counter import FlopCounterMode

    shape, classes = (3, config.img_size, config.img_size), config.num_classes or 1000
    if is_ref(config.data):  # the user's images: their own channels and size, and classes
        data = build_data(
            config.replace(batch_size=1, num_workers=0, persistent_workers=False),
            torch.device("cpu"),
        )
        shape, classes = tuple(data.train_loader.dataset[0][0].shape), data.num_classes
    model = build_model(config, config.num_classes or classes).to(device).eval()
    x = torch.randn(1, *shape, device=device)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return float(counter.get_total_flops())


def _matmul_flops_per_s(device: torch.device, dtype: torch.dtype, n: int) -> float:
    """The device's dense matmul rate: the best of several timed ``n x n`` matmuls."""
    n = n if device.type == "cuda" else min(n, 1024)
    a, b = torch.randn(2, n, n, device=device, dtype=dtype)
    iters = 20 if device.type == "cuda" else 3
    best = 0.0
    for _ in range(4):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(iters):
            a @ b
        synchronize(device)
        best = max(best, 2 * n**3 * iters / (time.perf_counter() - start))
    return best


def run_benchmark(
    *,
    workload: dict[str, Any] | None = None,
    steps: int = 20,
    warmup_steps: int = 5,
    repeats: int = 3,
    skip: tuple[str, ...] = (),
    amp: str | None = None,
    time_limit_s: float | None = None,
    warmup: bool = True,
    matmul_size: int = 8192,
    log: Callable[[str], Any] = print,
    autotune: bool | None = None,
) -> dict[str, Any]:
    """Every rung ``repeats`` times, interleaved, summarized. ``amp``: the ``+amp`` rung's mode;
    ``warmup``: the first rung once, unrecorded (off where the caller paid the one-time costs);
    ``time_limit_s``: no repeat starts that would end after it; ``autotune``: the max-autotune
    rung (default: on a GPU)."""
    base = benchmark_config(workload, steps=steps, warmup_steps=warmup_steps)
    device = resolve_device(base.device)
    cuda = device.type == "cuda"
    autotune = cuda if autotune is None else autotune
    arms, left_out = plan_ladder(base, cuda=cuda, amp=amp, skip=skip, autotune=autotune)
    for line in left_out:
        log(f"left out on {device.type}: {line}")

    def on_run(repeat: int, arm: Any, row: dict[str, Any]) -> None:
        log(
            f"repeat {repeat + 1}/{repeats} {arm.name:16s} {row['status']:8s} "
            f"{row['images_per_second']:10.1f} img/s"
        )

    runs = run_interleaved(
        arms,
        repeats=repeats,
        measure=lambda c: short_run(c, steps=steps),
        on_run=on_run,
        time_limit_s=time_limit_s,
        warmup=warmup,
    )
    report = _summarize(base, summarize(runs, arms), runs, device, matmul_size)
    report["left_out"] = left_out
    return report


def _summarize(
    base: TrainConfig, table: pd.DataFrame, runs: pd.DataFrame, device: torch.device, n: int
) -> dict[str, Any]:
    flops_fwd = _forward_flops(base, device)
    peak = _matmul_flops_per_s(device, torch.bfloat16, n)
    peak_fp32 = _matmul_flops_per_s(device, torch.float32, n)
    # MFU against the device's best dense rate: bf16 on a GPU; fp32 on a CPU without bf16 units.
    best_rate = max(peak, peak_fp32)
    table = table.assign(
        mfu=3 * flops_fwd * table["images_per_second"] / best_rate,
        peak_memory_allocated_bytes=table["arm"].map(_median_allocated(runs)),
    )
    rows = json.loads(table.to_json(orient="records"))
    measured = table.dropna(subset=["images_per_second"])
    best = measured.loc[measured["images_per_second"].idxmax()] if len(measured) else None
    ratio = math.nan if best is None else best["throughput_ratio_vs_baseline"]  # plain: NaN
    return {
        "environment": environment(device),
        "config": base.to_dict(),
        "memory_kind": rows[0]["memory_kind"] if rows else "",
        "repeats": int(runs["repeat"].max()) + 1 if len(runs) else 0,
        "forward_gflop_per_image": flops_fwd / 1e9,
        "train_gflop_per_image": 3 * flops_fwd / 1e9,
        "matmul_bf16_tflop_per_s": peak / 1e12,
        "matmul_fp32_tflop_per_s": peak_fp32 / 1e12,
        "mfu_reference": "bf16" if peak >= peak_fp32 else "fp32",
        "best_rung": None if best is None else best["arm"],
        "best_ratio_vs_plain": None if best is None else 1.0 if pd.isna(ratio) else float(ratio),
        "best_mfu": None if best is None else best["mfu"],
        "rows": rows,
        "runs": json.loads(runs.to_json(orient="records")),
        "cuda": device.type == "cuda",
    }


def _median_allocated(runs: pd.DataFrame) -> dict[str, float]:
    """Each arm's median CUDA ``max_memory_allocated`` (NaN on CPU)."""
    if runs.empty:
        return {}
    ok = runs[runs["status"] == "ok"]
    return ok.groupby("arm")["peak_memory_allocated_bytes"].median().to_dict()
