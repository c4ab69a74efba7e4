"""Stage ``recipe``: the classic recipe's table on a real host-to-device data path.

uint8 images in host memory (``data=synthetic_host``) reach the GPU through a DataLoader, pinned
or not, so the data-path techniques have bytes to move. Steps, each keeping the ones before
(:data:`STEPS`, in this order, each built from the technique registry): the plain loop, +AMP
fp16 with GradScaler, +``zero_grad(set_to_none=True)``, +non_blocking copies from pinned memory,
+the CUDA-stream prefetcher that normalizes on the GPU. Every step trains one epoch, repeated
and interleaved (:func:`tuner.compare.run_interleaved`): epoch time, steady-state images/s, the
data-wait fraction and peak memory, each change against the step before with its interval.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.compare import plan_ladder, run_interleaved
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.measure import paired_column, summarize
from tuner.report.comparison import arm_table, bar_plot
from tuner.techniques import ladder_knobs
from tuner.workloads import MICRO_BENCH

from ._context import StageContext, StageResult

__all__ = ["STEPS", "plan", "run"]

STEPS = ("amp", "set_to_none", "non_blocking", "prefetch")  # knob fields, in the recipe's order
AMP = "fp16"  # the recipe's AMP: fp16 with a GradScaler

_GPU: dict[str, Any] = {
    "model": "resnet50",
    "model_kwargs": {},
    "img_size": 224,
    "batch_size": 256,
    "synthetic_size": 256 * 30,  # one epoch = 30 steps, 7,680 images (1.2 GB of uint8)
    "num_classes": 1000,
    "num_workers": 8,
    "warmup_steps": 5,
}
_DRY: dict[str, Any] = {**MICRO_BENCH, "num_workers": 0, "warmup_steps": 1}


def plan(base: TrainConfig) -> list[Any]:
    """The recipe's steps as arms (planned for a GPU), each compared with the step before.

    Raises:
        TunerError: the registry's ladder no longer runs the recipe's knobs in its order.
    """
    skip = [k.field for k in ladder_knobs() if k.field not in STEPS]
    arms, _ = plan_ladder(base, cuda=True, amp=AMP, skip=skip)
    names = [a.name for a in arms]
    if names != ["plain", *(f"+{f}" for f in STEPS)]:
        raise TunerError(f"the technique ladder gives {names}, not the recipe's order {STEPS}.")
    return arms


def run(ctx: StageContext) -> StageResult:
    from tuner.engine import train

    params = {**ctx.pick(_GPU, _DRY), "data": "synthetic_host", "device": ctx.device}
    base = TrainConfig.from_params(
        {**params, "epochs": 1, "steps": None, "max_eval_batches": 1, "seed": 0}
    )
    arms = plan(base)
    runs = run_interleaved(
        arms,
        repeats=ctx.repeats(3, 2),
        measure=train,
        on_run=lambda r, arm, row: ctx.log(
            f"repeat {r + 1} {arm.name}: {row['status']}, epoch {row['train_time_s']:.2f} s"
        ),
        time_limit_s=ctx.remaining_s(),
    )
    summary = summarize(runs, arms)
    epoch = paired_column(runs, "train_time_s", arms)
    table = summary.merge(epoch, on="arm").assign(
        data_wait_fraction=summary["arm"].map(runs.groupby("arm")["data_wait_fraction"].median())
    )
    _write(ctx, base, runs, table)
    failed = table["failed"].astype(bool).sum()
    return StageResult(not failed and len(runs) > 0, _summary_line(table))


def _write(ctx: StageContext, base: TrainConfig, runs: pd.DataFrame, table: pd.DataFrame) -> None:
    from tuner.report.document import Image, Section, Table

    ctx.write_csv("recipe.csv", table)
    ctx.write_csv("runs.csv", runs)
    table = table.assign(data_wait=table["data_wait_fraction"].map(_percent))
    shown = arm_table(
        table,
        ["epoch time, s", "epoch time vs step before", "epoch time vs first", "images/s",
         "images/s vs step before", "data_wait", "peak memory", "memory vs step before"],
    ).rename(columns={"data_wait": "data wait"})  # fmt: skip
    plot = bar_plot(
        table,
        [("train_time_s", 1.0, "epoch time, s"), ("peak_memory_bytes", 2**30, "peak, GiB")],
        ctx.path("recipe.png"),
        title=f"{base.model} at {base.img_size} px, batch {base.batch_size}, host data",
    )
    about = [
        f"- model `{base.model}` at {base.img_size} px, batch {base.batch_size}, "
        f"{base.synthetic_size} uint8 images in host memory (`synthetic_host`), "
        f"{base.num_workers} DataLoader workers; one epoch per run",
        f"- {runs.attrs.get('repeats_done', 0)} repeats, interleaved round-robin after one "
        "discarded warm-up run; epoch time includes the first steps, images/s excludes the "
        f"first {base.warmup_steps}",
        "- changes are paired (same repeat): ratios for times and images/s, differences for "
        "memory, with 95% intervals; `tie`: the interval contains no change",
        f"- memory: {next(iter(runs['memory_kind'].dropna()), '?') if len(runs) else '?'}",
        "- epoch time is the training loop's wall time with every wait for queued GPU work in "
        "it (evaluation excluded), so an arm that lets the host run ahead is not timed early",
        "- from +amp on, fp16's GradScaler reads its inf check on the host every step "
        "(`.item()` in `GradScaler.step`, for the recipe's unfused AdamW; a fused one takes "
        "the check on the GPU): the host cannot queue the next copy before this step's "
        "kernels finish, so `non_blocking` alone overlaps a copy only with host work; the "
        "prefetcher queues the next batch's copy on its own stream before the step runs",
    ]
    sections = [
        Section("Setup", ["\n".join(about)]),
        Section("Each step of the recipe", [Table(shown), Image(plot, "epoch time and memory")]),
    ]
    ctx.write_markdown("The seed recipe on a host-to-device data path", sections)


def _percent(value: float) -> str:
    return "" if pd.isna(value) else f"{value:.1%}"


def _summary_line(table: pd.DataFrame) -> str:
    last = table.iloc[-1]
    ratio = last.get("train_time_s_ratio_vs_baseline")
    if pd.isna(ratio):
        return f"{len(table)} steps; no paired epoch time for the last step."
    return f"{len(table)} steps; the full recipe's epoch time is {ratio:.2f}x the plain loop's."
