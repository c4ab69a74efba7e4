"""The report's PNG plots (matplotlib, Agg backend: no display needed). Every trial a plot's
title and legend promise is drawn, each kind marked apart, with its interval where one exists;
each plot comes back as an :class:`~tuner.report.document.Image` holding the points it drew.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, NullLocator

from tuner.objectives import Objective
from tuner.record import KIND, TRIAL_ID
from tuner.report.document import Image
from tuner.stats import Change
from tuner.units import MIB, plural

__all__ = ["effects_plot", "importance_plot", "memory_plot", "pareto_plot", "throughput_plot"]


# How each kind of trial is drawn: (series name in the legend, marker, colour).
_KIND_STYLE = {
    "ok": ("ok", "o", "tab:blue"),
    "over budget": ("over budget", "x", "tab:orange"),
    "stopped early": ("stopped early", "s", "tab:purple"),
    "starved": ("starved (too few steps)", "P", "tab:olive"),
    "diverged": ("failed: diverged", "D", "tab:brown"),
    "errored": ("failed: errored", "v", "tab:red"),
    "incomplete": ("incomplete", "^", "tab:gray"),
}
FRONT = "Pareto front"


def pareto_plot(
    trials: pd.DataFrame, front: pd.DataFrame, objs: list[Objective], path: Path
) -> Image:
    """Objective 1 vs objective 2, every trial that measured either: ok ones with intervals,
    every other kind marked apart (a glyph and colour each) at what it measured; a value it
    never measured sits on the grey band at 0. A trial that measured neither has no place on
    the plot: the title counts it by kind instead of stacking it at (0, 0)."""
    (x, _), (y, _) = objs[0], objs[1]
    measured = np.isfinite(_num(trials, x)) | np.isfinite(_num(trials, y))
    shown, unplaced = trials[measured], trials[~measured]
    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    points: list[dict[str, Any]] = []
    again = _remeasured(shown)
    for kind, group in shown.groupby(shown[KIND].astype(str), sort=False):
        label, marker, color = _KIND_STYLE.get(kind, (kind, "o", "black"))
        for remeasured, part in group.groupby(again[group.index], sort=False):
            points += _kind_points(ax, part, (x, y), (label, marker, color), filled=remeasured)
            label = "_" + label  # one legend entry per kind
    if not front.empty:
        ordered = front.sort_values(x)
        xs, ys = _num(ordered, x), _num(ordered, y)
        ax.plot(xs, ys, "-", c="black", lw=1, zorder=1)
        ax.scatter(xs, ys, s=130, facecolors="none", edgecolors="black", label=FRONT, zorder=3)
        points += _points(FRONT, ordered, xs, ys)
    if again.any() and not again.all():  # two kinds of figure on one axis: say which is which
        for text, face in ((_REMEASURED, "0.3"), (_IN_SEARCH, "none")):
            ax.scatter([], [], marker="o", facecolors=face, edgecolors="0.3", label=text)
    band = ""
    for column, draw_band in ((x, ax.axvline), (y, ax.axhline)):
        if not np.isfinite(_num(shown, column)).all():  # the band of what was not measured
            draw_band(0, color="0.85", lw=6, zorder=0)
            band = "; not measured: on the grey band at 0"
    ax.set(xlabel=f"{x} (median, interval)", ylabel=f"{y} (95% interval)")
    title = _pareto_title(len(trials), unplaced) + band
    ax.set_title(title, fontsize=min(9.0, 9.0 * 80 / len(title)))  # a long one fits the width
    return _save(fig, ax, path, "Pareto front with intervals", points)


# The two figures a trial's images/s may be (tuner.answer.decision_values' throughput_source):
# filled, re-measured alone after the search; hollow, the search's own (beside other trials,
# and for a starved or stopped trial over its few steps: not comparable with the filled ones).
_REMEASURED = "filled: images/s re-measured alone"
_IN_SEARCH = "hollow: images/s in the search (not re-measured)"


def _remeasured(trials: pd.DataFrame) -> pd.Series:
    """Whether each trial's images/s is a re-measurement (False: the search's figure)."""
    source = trials.get("throughput_source", pd.Series("search", index=trials.index))
    return source.astype(str).eq("re-measured")


def _kind_points(
    ax: plt.Axes,
    group: pd.DataFrame,
    axes: tuple[str, str],
    style: tuple[str, str, str],
    *,
    filled: bool,
) -> list[dict[str, Any]]:
    """One kind's trials of one figure (re-measured: filled; in-search: hollow), ok ones with
    their intervals."""
    (x, y), (label, marker, color) = axes, style
    xs, ys = _on_band(_num(group, x)), _on_band(_num(group, y))
    face = color if filled else "none"
    if group[KIND].astype(str).eq("ok").all():
        bars = dict(fmt=marker, color=color, mfc=face, label=label, capsize=3, lw=0.8, zorder=2)
        ax.errorbar(xs, ys, xerr=_err(group, x, xs), yerr=_err(group, y, ys), **bars)
    elif marker in _LINE_MARKERS:  # a glyph of lines has no face to leave hollow
        ax.scatter(
            xs, ys, marker=marker, c=color, label=label, zorder=2, alpha=1 if filled else 0.6
        )
    else:
        ax.scatter(xs, ys, marker=marker, facecolors=face, edgecolors=color, label=label, zorder=2)
    figure = "re-measured" if filled else "search"
    return [
        {**p, "figure": figure} for p in _points(label.lstrip("_"), group, xs, ys, (marker, color))
    ]


_LINE_MARKERS = frozenset({"x", "+", "|", "_"})


def _pareto_title(total: int, unplaced: pd.DataFrame) -> str:
    """``Every trial (7) by kind``, or how many are drawn and what the others were."""
    if unplaced.empty:
        return f"Every trial ({total}) by kind"
    counts = unplaced[KIND].astype(str).value_counts()
    kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return (
        f"Trials that measured anything ({total - len(unplaced)} of {total}) by kind; none: {kinds}"
    )


def _err(frame: pd.DataFrame, column: str, mid: np.ndarray) -> np.ndarray | None:
    if f"{column}_low" not in frame or f"{column}_high" not in frame:
        return None
    low = np.nan_to_num(mid - _num(frame, f"{column}_low"), nan=0.0).clip(min=0)
    high = np.nan_to_num(_num(frame, f"{column}_high") - mid, nan=0.0).clip(min=0)
    return np.vstack([low, high])


def _on_band(values: np.ndarray) -> np.ndarray:
    """A value that was never measured is drawn at 0, on the axis band."""
    return np.where(np.isfinite(values), values, 0.0)


def _points(
    series: str,
    frame: pd.DataFrame,
    xs: np.ndarray,
    ys: np.ndarray,
    style: tuple[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The points drawn, with their glyph and colour when given (the auditor tells kinds
    apart by them)."""
    drawn = {} if style is None else {"marker": style[0], "color": style[1]}
    return [
        {"series": series, "x": float(a), "y": float(b), TRIAL_ID: t, **drawn}
        for a, b, t in zip(xs, ys, frame[TRIAL_ID].astype(str), strict=True)
    ]


def importance_plot(importances: dict[str, dict[str, float] | str], path: Path) -> Image | None:
    """One horizontal bar chart per objective that has importances."""
    computed = {m: v for m, v in importances.items() if isinstance(v, dict) and v}
    if not computed:
        return None
    fig, axes = plt.subplots(1, len(computed), figsize=(5.2 * len(computed), 3.6), squeeze=False)
    points = []
    for ax, (metric, values) in zip(axes[0], computed.items(), strict=True):
        names = list(values)[::-1]
        ax.barh(names, [values[n] for n in names], color="tab:green")
        ax.set(xlabel="importance (fANOVA)", title=metric, xlim=(0, 1))
        points += [{"series": metric, "x": values[n], "y": n, TRIAL_ID: ""} for n in names]
    return _save(fig, None, path, "parameter importance", points)


def effects_plot(summary: pd.DataFrame, path: Path) -> Image | None:
    """Each arm's images/s as a ratio of the recommended config's, with its interval."""
    rows = summary.dropna(subset=["throughput_ratio_vs_reference"])
    if rows.empty:
        return None
    ratio = _num(rows, "throughput_ratio_vs_reference")
    err = _err(rows, "throughput_ratio_vs_reference", ratio)
    verdicts = [
        Change.from_row(row, "throughput_ratio_vs_reference").verdict for _, row in rows.iterrows()
    ]
    styles = [_EFFECT_STYLE[_effect_kind(v, r)] for v, r in zip(verdicts, ratio, strict=True)]
    fig, ax = plt.subplots(figsize=(6.6, 0.45 * len(rows) + 1.8))
    for arm, r, style, i in zip(rows["arm"], ratio, styles, range(len(rows)), strict=True):
        one = None if err is None else err[:, i : i + 1]
        _, face, hatch = style
        ax.barh([arm], [r - 1], left=1, xerr=one, color=face, hatch=hatch, edgecolor="0.35",
                capsize=3)  # fmt: skip
    ax.axvline(1, c="black", lw=1)
    ax.invert_yaxis()
    ax.set(xlabel="images/s relative to the recommended config (1 = the same)",
           title="One change at a time, interleaved, paired")  # fmt: skip
    shown = dict.fromkeys(style for style in styles)  # the legend names what is drawn only
    handles = [Patch(facecolor=f, hatch=h, edgecolor="0.35", label=t) for t, f, h in shown]
    ax.legend(handles=handles, fontsize=7, loc="best")
    ax.grid(alpha=0.3, axis="x")
    points = [  # with the look each bar was drawn with (its verdict's, by the one rule)
        {"series": "arms", "x": float(r), "y": str(a), TRIAL_ID: "", "look": style[0]}
        for r, a, style in zip(ratio, rows["arm"], styles, strict=True)
    ]
    return _save(fig, None, path, "technique effects", points)


# Each verdict of the one rule its own look (a tie and "says nothing" are not alike).
_EFFECT_STYLE = {
    "faster": ("faster, beyond noise", "tab:green", ""),
    "slower": ("slower, beyond noise", "tab:red", ""),
    "tie": ("a tie (within noise)", "tab:gray", ""),
    "uninformative": ("interval says nothing", "white", "///"),
    "none": ("one pair: no interval", "white", ".."),
}


def _effect_kind(verdict: str, ratio: float) -> str:
    if verdict == "separated":
        return "faster" if ratio > 1 else "slower"
    return verdict


def throughput_plot(trials: pd.DataFrame, path: Path) -> Image | None:
    """images/s vs batch size for every trial that measured it: the ok ones as one series (points
    + median line) per AMP mode that ran, every other kind marked apart."""
    shown = _by_batch(trials, "images_per_second")
    if shown.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    points: list[dict[str, Any]] = []
    ok = shown[shown[KIND] == "ok"]
    amp = ok["effective_amp"] if "effective_amp" in ok else pd.Series("off", index=ok.index)
    for mode, group in ok.groupby(amp.astype(object).fillna("off").astype(str)):
        batch, ips = _num(group, "param_batch_size"), _num(group, "images_per_second")
        drawn = ax.scatter(batch, ips, label=f"ok, amp={mode}", alpha=0.7)
        medians = group.assign(b=batch, v=ips).groupby("b")["v"].median()
        ax.plot(medians.index, medians.to_numpy(), c=drawn.get_facecolor()[0])
        points += _points(f"ok, amp={mode}", group, batch, ips)
    points += _other_kinds(ax, shown[shown[KIND] != "ok"], "images_per_second", 1.0)
    _batch_axis(ax, shown)
    ax.set(ylabel="images/s", title=f"Throughput vs batch size: {plural(len(shown), 'trial')}")
    return _save(fig, ax, path, "throughput_vs_batch", points)


def memory_plot(trials: pd.DataFrame, limit: float | None, path: Path) -> Image | None:
    """Peak memory vs batch size (every trial that measured it, by kind) with the budget line."""
    measured = _by_batch(trials, "peak_memory_bytes")
    if measured.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ok = measured[measured[KIND] == "ok"]
    mib = _num(ok, "peak_memory_bytes") / MIB
    ax.scatter(_num(ok, "param_batch_size"), mib, c="tab:blue", label="ok")
    points = _points("ok", ok, _num(ok, "param_batch_size"), mib)
    points += _other_kinds(ax, measured[measured[KIND] != "ok"], "peak_memory_bytes", MIB)
    if limit:
        ax.axhline(limit / MIB, c="tab:orange", ls="--", label=f"budget {limit / MIB:,.0f} MiB")
    kinds = measured["memory_kind"].dropna().astype(str)
    _batch_axis(ax, measured)
    ax.set(
        ylabel=f"peak memory, MiB ({kinds.iloc[0] if len(kinds) else 'unknown kind'})",
        title=f"Memory vs batch size: {plural(len(measured), 'trial')}",
    )
    return _save(fig, ax, path, "memory_vs_batch", points)


def _by_batch(trials: pd.DataFrame, column: str) -> pd.DataFrame:
    """The trials that measured ``column`` and have a batch size (none without that column)."""
    if "param_batch_size" not in trials:
        return trials.iloc[:0]
    return trials[np.isfinite(_num(trials, column)) & np.isfinite(_num(trials, "param_batch_size"))]


def _other_kinds(
    ax: plt.Axes, frame: pd.DataFrame, column: str, scale: float
) -> list[dict[str, Any]]:
    """Trials that are not ok, one marked series per kind, at the value they measured."""
    points: list[dict[str, Any]] = []
    for kind, group in frame.groupby(frame[KIND].astype(str), sort=False):
        label, marker, color = _KIND_STYLE.get(kind, (kind, "o", "black"))
        xs, ys = _num(group, "param_batch_size"), _num(group, column) / scale
        ax.scatter(xs, ys, marker=marker, c=color, s=60, label=label, zorder=3)
        points += _points(label, group, xs, ys)
    return points


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


def _save(
    fig: plt.Figure, ax: plt.Axes | None, path: Path, alt: str, points: list[dict[str, Any]]
) -> Image:
    """Write the PNG; the Image carries the points drawn and the series its legend names."""
    legend: list[str] = []
    title = " / ".join(a.get_title() for a in fig.axes if a.get_title())
    if ax is not None:
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles, labels, fontsize=8)
        legend = [label for label in labels if not label.startswith("budget")]
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Image(path, alt, tuple(points), tuple(legend), title)
