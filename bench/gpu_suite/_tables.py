"""Tables and plots of the suite's comparisons (arms summarized by :func:`tuner.compare.summarize`).

Cells use the report's own formatting (:mod:`tuner.report.document`): ``median [interval]`` for
an estimate, ``1.12x [1.03–1.22]`` for a paired ratio, ``tie (...)`` inside the noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tuner.compare import Arm, paired
from tuner.stats import median_interval, paired_ratio

__all__ = ["CELLS", "arm_table", "bar_plot", "paired_column"]

# title -> (summary column, formatter kind, format spec): the cells a comparison can show.
CELLS: dict[str, tuple[str, str, str]] = {
    "images/s": ("images_per_second", "estimate", ",.0f"),
    "images/s vs step before": ("throughput_ratio_vs_reference", "change", ""),
    "images/s vs first": ("throughput_ratio_vs_baseline", "change", ""),
    "peak memory": ("peak_memory_bytes", "estimate", "bytes"),
    "memory vs step before": ("memory_change_bytes_vs_reference", "change", ""),
    "memory vs first": ("memory_change_bytes_vs_baseline", "change", ""),
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


def paired_column(runs: pd.DataFrame, column: str, arms: Sequence[Arm]) -> pd.DataFrame:
    """Median [interval] of ``column`` per arm and its paired ratio against the arm's reference
    and baseline (as :func:`tuner.compare.summarize` does for images/s): one row per arm."""
    rows = []
    for arm in arms:
        mine = runs[(runs["status"] == "ok") & (runs["arm"] == arm.name)] if len(runs) else runs
        est = median_interval(mine[column].tolist() if len(mine) else [])
        row = {"arm": arm.name, column: est.median}
        row[f"{column}_low"], row[f"{column}_high"] = est.low, est.high
        for label, other in (("reference", arm.reference), ("baseline", arm.baseline)):
            ours, theirs = paired(runs, arm.name, other) if other else (runs[:0], runs[:0])
            if other == arm.name or ours.empty:
                continue
            change = paired_ratio(theirs[column].tolist(), ours[column].tolist())
            key = f"{column}_ratio_vs_{label}"
            row[key], row[f"{key}_low"], row[f"{key}_high"] = change.value, change.low, change.high
            row[f"{key}_tie"], row[f"{key}_n"] = change.tie, change.n
            row[f"{key}_verdict"] = change.verdict  # the one rule (tuner.stats)
        rows.append(row)
    return pd.DataFrame(rows)


def bar_plot(
    summary: pd.DataFrame, panels: Sequence[tuple[str, float, str]], path: Path, *, title: str
) -> Path:
    """One bar panel per ``(column, scale, y label)``, medians with their intervals as errors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (column, scale, label) in zip(axes[0], panels, strict=True):
        mid = summary[column] / scale
        err = [
            (mid - summary[f"{column}_low"] / scale).clip(lower=0).fillna(0),
            (summary[f"{column}_high"] / scale - mid).clip(lower=0).fillna(0),
        ]
        ax.bar(summary["arm"], mid.fillna(0), yerr=err, capsize=3, color="tab:blue")
        ax.set(ylabel=label)
        ax.grid(alpha=0.3, axis="y")
        plt.setp(ax.get_xticklabels(), rotation=35, ha="right", rotation_mode="anchor")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
