"""The ablation's report (``tuner ablate``): ``reports/<name>/ablation.{csv,md,html,png}`` and
``runs.csv``, and the table the console prints; the measuring is :mod:`tuner.compare.ablation`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from tuner.report.comparison import arm_table, bar_plot
from tuner.report.document import Image, Section, Table, render_html, render_markdown

__all__ = ["about_lines", "terminal_table", "write_ablation"]

# The cells of the ablation's table (tuner.report.comparison.CELLS).
_CELLS = (
    "images/s",
    "vs step before",
    "vs first",
    "peak memory",
    "memory vs first",
    "val accuracy",
    "accuracy vs first",
)
_PANELS = (
    ("images_per_second", 1.0, "images/s (median, interval)", "Throughput per step"),
    ("peak_memory_bytes", 2**20, "peak memory, MiB", "Peak memory per step"),
)


def write_ablation(
    summary: pd.DataFrame, runs: pd.DataFrame, *, out_dir: Path, title: str, about: list[str]
) -> Path:
    """``ablation.csv`` (the summary), ``runs.csv``, ``ablation.md``, ``ablation.html``, plot."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / "ablation.csv", index=False)
    runs.to_csv(out_dir / "runs.csv", index=False)
    colors = ["tab:blue" if g == "ladder" else "tab:purple" for g in summary["group"]]
    plot = bar_plot(summary, _PANELS, out_dir / "ablation.png", colors=colors)
    sections = [
        Section("Setup", ["\n".join(f"- {line}" for line in about)]),
        Section(
            "Results per step",
            [
                "Median over the repeats that finished, with the interval of the median. "
                "Changes are paired (same repeat), against the step before (`reference`) and "
                "the first step of each comparison: throughput as a ratio, memory and accuracy "
                "as differences, each with its 95% interval; `tie` means the interval contains "
                "no change. An accuracy interval also covers the validation set's sampling "
                "error (Newcombe's interval from the set's size): the repeats share one seed, "
                "so they agree with each other, and variation between seeds is not in it. A "
                "step with `fell_back` did not run its technique on this hardware.",
                Table(
                    arm_table(summary, _CELLS),
                    "Ladder (each step keeps the ones above), then norms",
                ),
                Image(plot, "throughput and memory per step"),
            ],
        ),
        Section("Every run", [Table(runs.drop(columns=["device", "device_name"]))]),
    ]
    (out_dir / "ablation.md").write_text(render_markdown(title, sections))
    (out_dir / "ablation.html").write_text(render_html(title, sections))
    return out_dir


def terminal_table(summary: pd.DataFrame) -> str:
    """The summary as the console prints it (the same cells as the report's table)."""
    return arm_table(summary, _CELLS).to_string(index=False)


def about_lines(base: Any, runs: pd.DataFrame, repeats: int) -> list[str]:
    """The report's Setup: the workload, the budget per run, the repeats, the device."""
    import timm
    import torch

    from tuner.compare import dp_vs_ddp

    device = f"{runs['device'].iloc[0]} ({runs['device_name'].iloc[0]})" if len(runs) else "?"
    return [
        f"model `{base.model}` {dict(base.model_kwargs) or ''}, data `{base.data}` at "
        f"{base.img_size} px, batch size {base.batch_size}",
        f"budget per run: steps={base.steps}, epochs={base.epochs}; first "
        f"{base.warmup_steps} steps excluded from throughput (warm-up, compile)",
        f"{repeats} repeats per step, seed {base.seed}, run round-robin across steps",
        f"device: {device}; torch {torch.__version__}, timm {timm.__version__}",
        f"memory: {runs['memory_kind'].iloc[0] if len(runs) else '?'}",
    ] + (
        [dp_vs_ddp.setup_line(torch.cuda.device_count())]
        if len(runs) and (runs["group"] == dp_vs_ddp.GROUP).any()
        else []
    )
