"""Stage ``norms``: BatchNorm vs GroupNorm at group counts 1, 8 and 32, on this GPU.

On a convolutional net (resnet50) and on a hybrid ViT's ResNet stem (``vit_small_r26_s32_224``),
bf16 autocast, synthetic data on the GPU: each GroupNorm arm is paired with BatchNorm (the arms
of :func:`tuner.compare.ablation.plan_ablation`'s norm comparison), measured by short probes,
repeated and interleaved: images/s and peak memory, each GroupNorm's change against BatchNorm
with its interval. It settles, for this GPU, the claim "GroupNorm is slower and uses more memory".
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.compare import ablation, run_interleaved, summarize
from tuner.config import TrainConfig
from tuner.report.comparison import arm_table, bar_plot
from tuner.techniques import knob
from tuner.workloads import MICRO_VIT

from ._context import StageContext, StageResult

__all__ = ["run"]

_GPU: dict[str, Any] = {
    "models": {"resnet50": {}, "vit_small_r26_s32_224": {}},
    "groups": (1, 8, 32),
    "img_size": 224,
    "batch_size": 128,
    "synthetic_size": 128 * 50,
    "num_classes": 1000,
    "steps": 30,
    "warmup_steps": 10,
    "amp": "bf16",
}
_DRY: dict[str, Any] = {  # small stand-ins with the same kinds of norm layers
    "models": {
        "test_resnet": {},  # 16 to 192 channels: 32 groups do not divide its first layers
        MICRO_VIT["model"]: MICRO_VIT["model_kwargs"],
    },
    "groups": (1, 8, 16),
    "img_size": 32,
    "batch_size": 8,
    "synthetic_size": 64,
    "num_classes": 10,
    "steps": 2,
    "warmup_steps": 1,
    "amp": "off",  # bf16 matmuls are emulated, hence slow, on many CPUs
}


def run(ctx: StageContext) -> StageResult:
    from tuner.engine import short_run

    s = ctx.pick(_GPU, _DRY)
    tables, every_run = [], []
    for i, (model, kwargs) in enumerate(s["models"].items()):
        arms = _arms(ctx, s, model, kwargs)
        runs = run_interleaved(
            arms,
            repeats=ctx.repeats(5, 2),
            measure=lambda c: short_run(c, steps=s["steps"]),
            on_run=lambda r, arm, row, m=model: ctx.log(
                f"{m} repeat {r + 1} {arm.name}: {row['status']}, "
                f"{row['images_per_second']:.1f} images/s"
            ),
            time_limit_s=ctx.remaining_s() * (i + 1) / len(s["models"]),  # a share per model
        )
        tables.append(summarize(runs, arms).assign(model=model))
        every_run.append(runs.assign(model=model))
    table, runs = pd.concat(tables, ignore_index=True), pd.concat(every_run, ignore_index=True)
    _write(ctx, table, runs)
    ok = not table["failed"].astype(bool).any()
    return StageResult(ok, _summary_line(table))


def _arms(ctx: StageContext, s: dict[str, Any], model: str, kwargs: dict) -> list[Any]:
    """BatchNorm, then GroupNorm per group count: the ablation's norm arms, at ``s["amp"]``."""
    base = TrainConfig.from_params({
        "model": model, "model_kwargs": kwargs, "data": "synthetic", "device": ctx.device,
        **{k: s[k] for k in ("img_size", "batch_size", "synthetic_size", "num_classes")},
        "epochs": None, "steps": s["steps"], "warmup_steps": s["warmup_steps"],
        **knob("amp").settings(s["amp"]),
    })  # fmt: skip
    techniques = [k for k in ablation.skippable() if k != knob("norm").field]
    # Every ladder rung is skipped, so the ablation's own amp (its +amp rung) is unused here.
    arms, _ = ablation.plan_ablation(
        base, cuda=ctx.cuda, amp="bf16", groups=s["groups"], skip=techniques
    )
    return [a for a in arms if a.group == "norm"]


def _write(ctx: StageContext, table: pd.DataFrame, runs: pd.DataFrame) -> None:
    from tuner.report.document import Image, Section, Table

    ctx.write_csv("norms.csv", table)
    ctx.write_csv("runs.csv", runs)
    precision = "fp32" if ctx.pick(_GPU, _DRY)["amp"] == "off" else "bf16 autocast"
    sections = [
        Section(
            "Setup",
            [
                f"- {precision}, synthetic data on the device, every other technique off; "
                "each arm a short probe (warm-up excluded), interleaved round-robin, repeated\n"
                "- `vs first`: paired against BatchNorm in the same repeat; images/s as a ratio, "
                "peak memory as a difference, each with its 95% interval; `tie`: no change "
                "beyond the noise\n"
                f"- memory: {next(iter(runs['memory_kind'].dropna()), '?')}"
            ],
        )
    ]
    for model, part in table.groupby("model", sort=False):
        plot = bar_plot(
            part.reset_index(drop=True),
            [("images_per_second", 1.0, "images/s"), ("peak_memory_bytes", 2**30, "peak, GiB")],
            ctx.path(f"norms_{model}.png"),
            title=model,
        )
        shown = arm_table(
            part.reset_index(drop=True),
            ["images/s", "images/s vs first", "peak memory", "memory vs first"],
        )
        sections.append(Section(model, [Table(shown), Image(plot, f"{model}: norms")]))
    ctx.write_markdown("BatchNorm vs GroupNorm", sections)


def _summary_line(table: pd.DataFrame) -> str:
    parts = []
    for model, part in table.groupby("model", sort=False):
        group = part[part["arm"] != "batchnorm"]
        beyond = group["throughput_ratio_vs_baseline_verdict"] == "separated"
        slower = int((beyond & (group["throughput_ratio_vs_baseline"] < 1)).sum())
        parts.append(f"{model}: {slower}/{len(group)} GroupNorm arms slower than BatchNorm")
    return "; ".join(parts) + " (beyond the noise)."
