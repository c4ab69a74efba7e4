"""The report's PNG plots (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

__all__ = ["importance_plot", "memory_plot", "pareto_plot", "throughput_plot"]

Objective = tuple[str, str]


def pareto_plot(
    trials: pd.DataFrame, front: pd.DataFrame, objs: list[Objective], path: Path
) -> Path:
    """Objective 1 vs objective 2: feasible, Pareto front, infeasible and failed distinctly."""
    (x, _), (y, _) = objs[0], objs[1]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    xs, ys = _num(trials, x), _num(trials, y)
    feasible = trials["feasible"].astype(bool)
    failed = ~feasible & (trials["status"] != "ok")
    floor = np.nanmin(ys) if np.isfinite(ys).any() else 0.0
    ax.scatter(xs[feasible], ys[feasible], c="tab:blue", label="feasible", zorder=2)
    infeasible = ~feasible & ~failed
    ax.scatter(
        xs[infeasible],
        ys[infeasible],
        marker="x",
        c="tab:orange",
        label="infeasible (over budget)",
        zorder=2,
    )
    ax.scatter(
        xs[failed],
        np.where(np.isfinite(ys[failed]), ys[failed], floor),
        marker="v",
        c="tab:red",
        label="failed (oom / error / diverged)",
        zorder=2,
    )
    if not front.empty:
        ax.plot(
            _num(front, x),
            _num(front, y),
            "-o",
            c="black",
            mfc="none",
            ms=11,
            label="Pareto front",
            zorder=3,
        )
    ax.set(xlabel=x, ylabel=y, title="Trials (failed trials without a value sit at the bottom)")
    return _save(fig, ax, path)


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


def throughput_plot(trials: pd.DataFrame, path: Path) -> Path | None:
    """images/s vs batch size, one series (points + median line) per AMP mode."""
    done = trials[trials["status"] == "ok"]
    if done.empty or "param_batch_size" not in done:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    amp = done["param_amp"] if "param_amp" in done else pd.Series("off (fixed)", index=done.index)
    for mode, group in done.groupby(amp.astype(str)):
        batch, ips = _num(group, "param_batch_size"), _num(group, "images_per_second")
        points = ax.scatter(batch, ips, label=f"amp={mode}", alpha=0.7)
        medians = group.assign(b=batch, v=ips).groupby("b")["v"].median()
        ax.plot(medians.index, medians.to_numpy(), c=points.get_facecolor()[0])
    ax.set(xscale="log", xlabel="batch size", ylabel="images/s", title="Throughput vs batch size")
    return _save(fig, ax, path)


def memory_plot(trials: pd.DataFrame, limit: float | None, path: Path) -> Path | None:
    """Peak memory vs batch size (all trials that measured it) with the budget line."""
    if "param_batch_size" not in trials:
        return None
    measured = trials[np.isfinite(_num(trials, "peak_memory_bytes"))]
    if measured.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    mib = _num(measured, "peak_memory_bytes") / 2**20
    colors = np.where(measured["status"] == "ok", "tab:blue", "tab:red")
    ax.scatter(_num(measured, "param_batch_size"), mib, c=colors, label="trials (red: failed)")
    if limit:
        ax.axhline(limit / 2**20, c="tab:orange", ls="--", label=f"budget {limit / 2**20:.0f} MiB")
    kind = (
        str(measured["memory_kind"].dropna().iloc[0])
        if measured["memory_kind"].notna().any()
        else ""
    )
    ax.set(
        xscale="log",
        xlabel="batch size",
        ylabel=f"peak memory, MiB ({kind})",
        title="Memory vs batch size",
    )
    return _save(fig, ax, path)


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
