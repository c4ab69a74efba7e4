"""The report's PNG plots (matplotlib, Agg backend: no display needed).

Every point a plot states carries its interval where one exists (error bars); memory is in MiB;
batch-size axes are labelled with the batch sizes themselves.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, NullLocator

from tuner.objectives import Objective
from tuner.record import KIND
from tuner.units import MIB

__all__ = ["effects_plot", "importance_plot", "memory_plot", "pareto_plot", "throughput_plot"]


def pareto_plot(
    trials: pd.DataFrame, front: pd.DataFrame, objs: list[Objective], path: Path
) -> Path:
    """Objective 1 vs objective 2 with intervals: candidates, front, over budget, failed."""
    (x, _), (y, _) = objs[0], objs[1]
    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    kinds = trials[KIND]
    _errorbars(ax, trials[kinds == "ok"], x, y, fmt="o", color="tab:blue", label="ok")
    over = trials[kinds.isin(["over budget", "stopped early"])]
    ax.scatter(
        _num(over, x),
        _num(over, y),
        marker="x",
        c="tab:orange",
        label="over budget, or stopped early",
        zorder=2,
    )
    ys = _num(trials, y)
    floor = np.nanmin(ys) if np.isfinite(ys).any() else 0.0
    bad = trials[kinds.isin(["errored", "diverged"])]
    ax.scatter(
        _num(bad, x),
        np.where(np.isfinite(_num(bad, y)), _num(bad, y), floor),
        marker="v",
        c="tab:red",
        label="errored, or diverged",
        zorder=2,
    )
    if not front.empty:
        ordered = front.sort_values(x)
        ax.plot(_num(ordered, x), _num(ordered, y), "-", c="black", lw=1, zorder=1)
        ax.scatter(
            _num(ordered, x),
            _num(ordered, y),
            s=130,
            facecolors="none",
            edgecolors="black",
            label="Pareto front",
            zorder=3,
        )
    ax.set(
        xlabel=f"{x} (median, interval)",
        ylabel=f"{y} (95% interval)",
        title="Trials: failed ones without a value sit at the bottom",
    )
    return _save(fig, ax, path)


def _errorbars(ax: plt.Axes, frame: pd.DataFrame, x: str, y: str, **style: object) -> None:
    xs, ys = _num(frame, x), _num(frame, y)
    xerr = _err(frame, x, xs)
    yerr = _err(frame, y, ys)
    ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, capsize=3, lw=0.8, zorder=2, **style)


def _err(frame: pd.DataFrame, column: str, mid: np.ndarray) -> np.ndarray | None:
    if f"{column}_low" not in frame or f"{column}_high" not in frame:
        return None
    low = np.nan_to_num(mid - _num(frame, f"{column}_low"), nan=0.0).clip(min=0)
    high = np.nan_to_num(_num(frame, f"{column}_high") - mid, nan=0.0).clip(min=0)
    return np.vstack([low, high])


def importance_plot(importances: dict[str, dict[str, float] | str], path: Path) -> Path | None:
    """One horizontal bar chart per objective that has importances."""
    computed = {m: v for m, v in importances.items() if isinstance(v, dict) and v}
    if not computed:
        return None
    fig, axes = plt.subplots(1, len(computed), figsize=(5.2 * len(computed), 3.6), squeeze=False)
    for ax, (metric, values) in zip(axes[0], computed.items(), strict=True):
        names = list(values)[::-1]
        ax.barh(names, [values[n] for n in names], color="tab:green")
        ax.set(xlabel="importance (fANOVA)", title=metric, xlim=(0, 1))
    return _save(fig, None, path)


def effects_plot(summary: pd.DataFrame, path: Path) -> Path | None:
    """Each arm's images/s as a ratio of the recommended config's, with its interval."""
    rows = summary.dropna(subset=["throughput_ratio_vs_reference"])
    if rows.empty:
        return None
    ratio = _num(rows, "throughput_ratio_vs_reference")
    err = _err(
        rows.rename(columns=lambda c: c.replace("throughput_ratio_vs_reference", "r")), "r", ratio
    )
    colors = [
        "tab:gray" if t else ("tab:green" if r > 1 else "tab:red")
        for r, t in zip(ratio, rows["throughput_ratio_vs_reference_tie"], strict=True)
    ]
    fig, ax = plt.subplots(figsize=(6.6, 0.45 * len(rows) + 1.4))
    ax.barh(rows["arm"], ratio - 1, left=1, xerr=err, color=colors, capsize=3)
    ax.axvline(1, c="black", lw=1)
    ax.invert_yaxis()
    ax.set(
        xlabel="images/s relative to the recommended config (grey: within noise)",
        title="One change at a time, interleaved, paired",
    )
    ax.grid(alpha=0.3, axis="x")
    return _save(fig, None, path)


def throughput_plot(trials: pd.DataFrame, path: Path) -> Path | None:
    """images/s vs batch size, one series (points + median line) per AMP mode that ran."""
    done = trials[trials["status"] == "ok"]
    if done.empty or "param_batch_size" not in done:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    amp = done["effective_amp"] if "effective_amp" in done else pd.Series("off", index=done.index)
    for mode, group in done.groupby(amp.fillna("off").astype(str)):
        batch, ips = _num(group, "param_batch_size"), _num(group, "images_per_second")
        points = ax.scatter(batch, ips, label=f"amp={mode}", alpha=0.7)
        medians = group.assign(b=batch, v=ips).groupby("b")["v"].median()
        ax.plot(medians.index, medians.to_numpy(), c=points.get_facecolor()[0])
    _batch_axis(ax, done)
    ax.set(ylabel="images/s", title="Throughput vs batch size")
    return _save(fig, ax, path)


def memory_plot(trials: pd.DataFrame, limit: float | None, path: Path) -> Path | None:
    """Peak memory vs batch size (all trials that measured it) with the budget line."""
    if "param_batch_size" not in trials:
        return None
    measured = trials[np.isfinite(_num(trials, "peak_memory_bytes"))]
    if measured.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    mib = _num(measured, "peak_memory_bytes") / MIB
    colors = np.where(measured["status"] == "ok", "tab:blue", "tab:red")
    ax.scatter(_num(measured, "param_batch_size"), mib, c=colors, label="trials (red: failed)")
    if limit:
        ax.axhline(limit / MIB, c="tab:orange", ls="--", label=f"budget {limit / MIB:,.0f} MiB")
    kinds = measured["memory_kind"].dropna().astype(str)
    _batch_axis(ax, measured)
    ax.set(
        ylabel=f"peak memory, MiB ({kinds.iloc[0] if len(kinds) else 'unknown kind'})",
        title="Memory vs batch size",
    )
    return _save(fig, ax, path)


def _batch_axis(ax: plt.Axes, frame: pd.DataFrame) -> None:
    """A log axis whose ticks are the batch sizes that ran, written as numbers (64, 128, 256)."""
    sizes = sorted({int(v) for v in _num(frame, "param_batch_size") if np.isfinite(v)})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel("batch size")


def _num(frame: pd.DataFrame, column: str) -> np.ndarray:
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def _save(fig: plt.Figure, ax: plt.Axes | None, path: Path) -> Path:
    if ax is not None:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
