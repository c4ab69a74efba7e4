"""The engine benchmark: the plain loop vs each speed technique added in turn, in ONE run.

Every rung of the ladder is probed ``repeats`` times, interleaved (rung 1..N, then again), so
drift of a shared machine hits every rung alike; ratios are against the plain loop's median.
On a GPU it also reports model FLOPs utilization: training FLOPs per image (3 x the forward
FLOPs counted by ``torch.utils.flop_counter``) x images/s over the device's dense bf16 matmul
rate, timed in the same run. Used by ``python -m tuner bench`` and ``bench/engine_bench.py``.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from tuner.config import TrainConfig
from tuner.engine.build import resolve_device
from tuner.engine.loop import probe
from tuner.engine.meters import environment, synchronize
from tuner.engine.model import build_model

__all__ = ["LADDER", "default_workload", "forward_flops", "matmul_flops_per_s", "run_benchmark"]

# Each rung adds one technique to the one before; "best" is every switch at once.
LADDER: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    ("+amp", {"amp": "bf16"}),
    ("+set_to_none", {"set_to_none": True}),
    ("+non_blocking+pinned", {"non_blocking": True, "pin_memory": True}),
    ("+prefetch", {"prefetch": "cuda_stream"}),
    ("+channels_last", {"channels_last": True}),
    ("+fused_adamw", {"fused_adamw": True}),
    ("+compile", {"compile": "default"}),
    ("best (+max-autotune)", {"compile": "max-autotune"}),
]


def default_workload(cuda: bool) -> dict[str, Any]:
    """ViT-B/16 at 224 on a GPU; a small hybrid ViT at 32 px on CPU."""
    if cuda:
        return {"model": "vit_base_patch16_224", "img_size": 224, "batch_size": 256,
                "data": "synthetic", "synthetic_size": 256 * 50, "num_classes": 1000}  # fmt: skip
    return {"model": "vit_tiny_r_s16_p8_224", "img_size": 32, "batch_size": 64,
            "data": "synthetic", "synthetic_size": 64 * 50, "num_classes": 10}  # fmt: skip


def forward_flops(config: TrainConfig, device: torch.device) -> float:
    """FLOPs of one image's forward pass (a multiply-add counts 2), counted by torch."""
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model(config, config.num_classes or 1000).to(device).eval()
    x = torch.randn(1, 3, config.img_size, config.img_size, device=device)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return float(counter.get_total_flops())


def matmul_flops_per_s(device: torch.device, dtype: torch.dtype, n: int = 8192) -> float:
    """The device's dense matmul rate in ``dtype``: the best of several timed ``n x n`` matmuls."""
    n = n if device.type == "cuda" else 1024
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
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
    out_dir: Path | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Probe every rung ``repeats`` times (interleaved) and summarize; write JSON + Markdown."""
    device = resolve_device("auto")
    cuda = device.type == "cuda"
    base = TrainConfig(**{**default_workload(cuda), **(workload or {})},
                       steps=steps, epochs=None, warmup_steps=warmup_steps)  # fmt: skip
    rungs, changes = [], {}
    for name, step in LADDER:
        changes = {**changes, **step}
        if name not in skip:
            rungs.append((name, base.replace(**changes)))
    samples: dict[str, list[Any]] = {name: [] for name, _ in rungs}
    for r in range(repeats):
        for name, config in rungs:
            result = probe(config, steps=steps)
            samples[name].append(result)
            log(f"repeat {r + 1}/{repeats} {name:24s} {result.status:8s} "
                f"{result.images_per_second or 0:10.1f} img/s")  # fmt: skip
    report = _summarize(base, rungs, samples, device, cuda)
    if out_dir is not None:
        _write(report, Path(out_dir), "engine_cuda" if cuda else "engine_cpu")
    return report


def _summarize(base, rungs, samples, device, cuda) -> dict[str, Any]:
    flops_fwd = forward_flops(base, device)
    peak_dtype = torch.bfloat16
    peak = matmul_flops_per_s(device, peak_dtype)
    peak_fp32 = matmul_flops_per_s(device, torch.float32)
    # MFU against the device's best dense rate: bf16 on a GPU; fp32 on a CPU without bf16 units.
    best_rate = max(peak, peak_fp32)
    plain = _median([r.images_per_second for r in samples[rungs[0][0]] if r.ok])
    rows = []
    for name, config in rungs:
        ok = [r for r in samples[name] if r.ok]
        ips = [r.images_per_second for r in ok]
        median = _median(ips)
        rows.append({
            "rung": name,
            "status": ",".join(sorted({r.status for r in samples[name]})),
            "images_per_second_median": median,
            "images_per_second_min": min(ips) if ips else None,
            "images_per_second_max": max(ips) if ips else None,
            "ratio_vs_plain": median / plain if median and plain else None,
            "peak_memory_bytes_median": _median([r.peak_memory_bytes for r in ok]),
            "data_wait_fraction_median": _median([r.data_wait_fraction for r in ok]),
            "mfu": 3 * flops_fwd * median / best_rate if median else None,
            "effective": ok[-1].effective if ok else {},
            "notes": sorted({n for r in samples[name] for n in r.notes}),
            "errors": sorted({r.error for r in samples[name] if r.error}),
            "config": config.to_dict(),
        })  # fmt: skip
    best = max((r for r in rows if r["images_per_second_median"]),
               key=lambda r: r["images_per_second_median"], default=None)  # fmt: skip
    return {
        "environment": environment(device),
        "memory_kind": samples[rungs[0][0]][0].memory_kind,
        "repeats": len(samples[rungs[0][0]]),
        "forward_gflop_per_image": flops_fwd / 1e9,
        "train_gflop_per_image": 3 * flops_fwd / 1e9,
        "matmul_bf16_tflop_per_s": peak / 1e12,
        "matmul_fp32_tflop_per_s": peak_fp32 / 1e12,
        "mfu_reference": "bf16" if peak >= peak_fp32 else "fp32",
        "best_rung": best["rung"] if best else None,
        "best_ratio_vs_plain": best["ratio_vs_plain"] if best else None,
        "best_mfu": best["mfu"] if best else None,
        "rows": rows,
        "cuda": cuda,
    }


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _write(report: dict[str, Any], out_dir: Path, stem: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out_dir / f"{stem}.md").write_text(to_markdown(report))


def to_markdown(report: dict[str, Any]) -> str:
    env, rows = report["environment"], report["rows"]
    mib = "MiB (" + str(report["memory_kind"]) + ")"
    lines = [
        f"# Engine benchmark: {rows[0]['config']['model']} at {rows[0]['config']['img_size']} px",
        "",
        f"Device: {env['device']} ({env['device_name']}), torch {env['torch_version']}, "
        f"CUDA {env['cuda_version']}, timm {env['timm_version']}. Data: "
        f"{rows[0]['config']['data']}, batch {rows[0]['config']['batch_size']}, "
        f"{rows[0]['config']['steps']} measured steps after {rows[0]['config']['warmup_steps']} "
        f"warm-up steps, {report['repeats']} interleaved repeats (median [min-max]).",
        "",
        f"Training FLOPs/image (3 x forward): {report['train_gflop_per_image']:.4f} GFLOP; dense "
        f"matmul rate measured in this run: bf16 {report['matmul_bf16_tflop_per_s']:.3f} TFLOP/s, "
        f"fp32 {report['matmul_fp32_tflop_per_s']:.3f} TFLOP/s; MFU is against the "
        f"{report['mfu_reference']} rate.",
        "",
        f"| rung | images/s | ratio vs plain | peak memory {mib} | data wait | MFU |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ips = r["images_per_second_median"]
        if ips is None:
            lines.append(f"| {r['rung']} | {r['status']}: {'; '.join(r['errors'])[:80]} |||||")
            continue
        mem = (r["peak_memory_bytes_median"] or 0) / 2**20
        lines.append(
            f"| {r['rung']} | {ips:,.1f} [{r['images_per_second_min']:,.1f}-"
            f"{r['images_per_second_max']:,.1f}] | {r['ratio_vs_plain']:.2f}x | {mem:,.0f} | "
            f"{r['data_wait_fraction_median']:.1%} | {r['mfu']:.1%} |"
        )
    notes = sorted({n for r in rows for n in r["notes"]})
    if notes:
        lines += ["", "Fallbacks on this device:", *[f"- {n}" for n in notes]]
    lines += ["", f"Best: {report['best_rung']} at {report['best_ratio_vs_plain']:.2f}x the plain "
              f"loop, MFU {report['best_mfu']:.1%}.", ""]  # fmt: skip
    return "\n".join(lines)
