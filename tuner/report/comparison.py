"""Tables and plots of arms compared (rows of :func:`tuner.compare.summarize`): the ablation's
(``tuner ablate``) and the GPU suite's stages.

Cells use the report's own formatting (:mod:`tuner.report.document`): ``median [interval]`` for
an estimate, ``1.12x [1.03–1.22]`` for a paired ratio, ``tie (...)`` inside the noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

__all__ = ["CELLS", "arm_table", "bar_plot"]

# title -> (summary column, formatter kind, format spec): the cells a comparison can show.
CELLS: dict[str, tuple[str, str, str]] = {
    "images/s": ("images_per_second", "estimate", ",.0f"),
    "images/s vs step before": ("throughput_ratio_vs_reference", "change", ""),
    "images/s vs first": ("throughput_ratio_vs_baseline", "change", ""),
    "vs step before": ("throughput_ratio_vs_reference", "change", ""),  # the ablation's words
    "vs first": ("throughput_ratio_vs_baseline", "change", ""),
    "peak memory": ("peak_memory_bytes", "estimate", "bytes"),
    "memory vs step before": ("memory_change_bytes_vs_reference", "change", ""),
    "memory vs first": ("memory_change_bytes_vs_baseline", "change", ""),
    "val accuracy": ("val_accuracy", "estimate", ".3f"),
    "accuracy vs first": ("accuracy_change_vs_baseline", "change", ""),
    "epoch time, s": ("train_time_s", "estimate", ".2f"),
    "epoch time vs step before": ("train_time_s_ratio_vs_reference", "change", ""),
    "epoch time vs first": ("train_time_s_ratio_vs_baseline", "change", ""),
}


def arm_table(summary: pd.DataFrame, titles: Sequence[str]) -> pd.DataFrame:
    """The summary's cells to show: the step, its finished repeats, then ``titles`` (keys of
    :data:`CELLS`, or a column of ``summary`` shown as it is), then the fallbacks."""
    from tuner.report.document import change_text, estimate_text

    shown = pd.DataFrame({"step": summary["arm"], "repeats ok": summary["repeats_ok"]})
    for title in titles:
        if title not in CELLS:
            shown[title] = summary[title]
            continue
        column, kind, spec = CELLS[title]
        text = estimate_text if kind == "estimate" else change_text
        shown[title] = [text(row, column, spec) for _, row in summary.iterrows()]
    shown["fell back"] = summary["fell_back"]
    return shown


# A panel: (summary column, scale, y label) or (summary column, scale, y label, panel title).
Panel = tuple[str, float, str] | tuple[str, float, str, str]


def bar_plot(
    summary: pd.DataFrame,
    panels: Sequence[Panel],
    path: Path,
    *,
    title: str | None = None,
    colors: Sequence[str] | None = None,
) -> Path:
    """One bar panel per ``panels`` entry, medians with their intervals as errors; one color
    per bar (``colors``) or all blue."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (column, scale, label, *panel_title) in zip(axes[0], panels, strict=True):
        mid = summary[column] / scale
        err = [
            (mid - summary[f"{column}_low"] / scale).clip(lower=0).fillna(0),
            (summary[f"{column}_high"] / scale - mid).clip(lower=0).fillna(0),
        ]
        color = list(colors) if colors is not None else "tab:blue"
        ax.bar(summary["arm"], mid.fillna(0), yerr=err, capsize=3, color=color)
        ax.set(ylabel=label, title=panel_title[0] if panel_title else "")
        ax.grid(alpha=0.3, axis="y")
        plt.setp(ax.get_xticklabels(), rotation=35, ha="right", rotation_mode="anchor")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
