"""Stage ``fidelity``: the engine vs a minimal independent loop, on this GPU.

:func:`tuner.compare.fidelity.run_verify` (what ``python -m tuner bench --verify`` runs):
ViT-B/16 at 224, batch 256, bf16, each run a fresh process, interleaved and repeated while the
stage's time lasts; the engine/minimal ratio of images/s with its interval.
"""

from __future__ import annotations

from typing import Any

from tuner.compare.fidelity import run_verify, verify_config
from tuner.report.bench import write_verify
from tuner.workloads import MICRO_BENCH

from ._context import StageContext, StageResult

__all__ = ["run"]

_WRITE_S = 20  # kept for summarizing and writing after the last pair

_GPU: dict[str, Any] = {"workload": {}, "steps": 30, "warmup_steps": 10}
_DRY: dict[str, Any] = {
    "workload": MICRO_BENCH,
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
        log=ctx.log,
        time_limit_s=ctx.remaining_s() - _WRITE_S,
    )
    write_verify(report, ctx.out_dir)
    ratio = report["ratio_engine_to_minimal"]
    # One pair gives a ratio but no interval: no claim, as the ladder's rule (at least 2).
    return StageResult(ratio["low"] is not None, report["verdict"])
