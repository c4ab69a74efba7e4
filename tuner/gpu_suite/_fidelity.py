"""Stage ``fidelity``: the engine vs a minimal independent loop, on this GPU.

:func:`tuner.fidelity.run_verify` (what ``python -m tuner bench --verify`` runs): ViT-B/16 at 224,
batch 256, bf16, each run a fresh process, interleaved and repeated while the stage's time lasts;
the engine/minimal ratio of images/s with its interval.
"""

from __future__ import annotations

from typing import Any

from tuner.fidelity import run_verify, verify_config
from tuner.gpu_suite._context import StageContext, StageResult

__all__ = ["run"]

_WRITE_S = 20  # kept for summarizing and writing after the last pair

_GPU: dict[str, Any] = {"workload": {}, "steps": 30, "warmup_steps": 10}
_DRY: dict[str, Any] = {
    "workload": {
        "model": "vit_tiny_r_s16_p8_224",
        "model_kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 1, "num_heads": 2},
        "img_size": 32,
        "batch_size": 16,
        "synthetic_size": 64,
        "num_classes": 10,
    },
    "steps": 10,
    "warmup_steps": 2,
}


def run(ctx: StageContext) -> StageResult:
    s = ctx.pick(_GPU, _DRY)
    config = verify_config(cuda=ctx.cuda, workload={**s["workload"], "device": ctx.device})
    report = run_verify(
        config,
        steps=s["steps"],
        warmup_steps=s["warmup_steps"],
        repeats=ctx.repeats(5, 2),
        out_dir=ctx.out_dir,
        log=ctx.log,
        time_limit_s=ctx.remaining_s() - _WRITE_S,
    )
    ratio = report["ratio_engine_to_minimal"]
    # One pair gives a ratio but no interval: no claim, as the ladder's rule (at least 2).
    return StageResult(ratio["low"] is not None, report["verdict"])
