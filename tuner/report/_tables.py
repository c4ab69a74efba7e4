"""The report's tables, computed with pandas from the trials table: status, Pareto front, best."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Objective", "best_per_objective", "memory_limit", "objectives", "pareto_front"]

Objective = tuple[str, str]  # (metric column, "max" | "min")
DEFAULT_OBJECTIVES: list[Objective] = [("images_per_second", "max"), ("val_accuracy", "max")]
# tuner search's --objective names and the metrics they optimise.
_NAMED = {
    "pareto": DEFAULT_OBJECTIVES,
    "throughput": [("images_per_second", "max")],
    "accuracy": [("val_accuracy", "max")],
}


def objectives(metadata: Mapping[str, Any]) -> list[Objective]:
    """The objectives from the metadata (dict, list of pairs/dicts, or a --objective name).

    The report always shows throughput and accuracy: a single-objective search gets the other
    one added (second), so the Pareto front and the recommendations stay comparable.
    """
    raw = metadata.get("objectives", metadata.get("objective"))
    parsed: list[Objective] = []
    if isinstance(raw, str):
        parsed = list(_NAMED.get(raw, DEFAULT_OBJECTIVES))
    elif isinstance(raw, Mapping):
        parsed = [(str(k), str(v)) for k, v in raw.items()]
    elif isinstance(raw, list):
        for item in raw:
            if isinstance(item, Mapping):
                direction = item.get("direction", item.get("mode", "max"))
                parsed.append((str(item.get("metric")), str(direction)))
            elif isinstance(item, list | tuple) and len(item) == 2:
                parsed.append((str(item[0]), str(item[1])))
    # tuner search tells Optuna objective_<metric> (0 for infeasible trials); report the metric.
    parsed = [
        (m.removeprefix("objective_"), "min" if d.lower().startswith("min") else "max")
        for m, d in parsed
    ]
    for default in DEFAULT_OBJECTIVES:
        if default[0] not in {m for m, _ in parsed}:
            parsed.append(default)
    return parsed


def memory_limit(metadata: Mapping[str, Any]) -> float | None:
    """The search's memory budget in bytes, or ``None`` when it had none."""
    for key in ("max_memory_bytes", "memory_limit_bytes"):
        value = metadata.get(key)
        if isinstance(value, int | float) and value > 0:
            return float(value)
    return None


def candidates(trials: pd.DataFrame, objs: list[Objective]) -> pd.DataFrame:
    """Feasible trials with a finite value for every objective."""
    mask = trials["feasible"].astype(bool)
    for metric, _ in objs:
        mask &= np.isfinite(pd.to_numeric(trials[metric], errors="coerce"))
    return trials[mask]


def pareto_front(trials: pd.DataFrame, objs: list[Objective]) -> pd.DataFrame:
    """The non-dominated feasible trials, best first on the first objective."""
    pool = candidates(trials, objs)
    if pool.empty:
        return pool
    signs = np.array([1.0 if d == "max" else -1.0 for _, d in objs])
    values = pool[[m for m, _ in objs]].to_numpy(dtype=float) * signs
    keep = [
        not np.any(np.all(values >= row, axis=1) & np.any(values > row, axis=1)) for row in values
    ]
    first, direction = objs[0]
    return pool[keep].sort_values(first, ascending=direction == "min")


def best_per_objective(trials: pd.DataFrame, objs: list[Objective]) -> dict[str, pd.Series]:
    """For each objective, the feasible trial that is best on it (ties: better on the others)."""
    pool = candidates(trials, objs)
    best: dict[str, pd.Series] = {}
    if pool.empty:
        return best
    for metric, direction in objs:
        others = [m for m, _ in objs if m != metric]
        order = pool.sort_values(
            [metric, *others],
            ascending=[direction == "min"] + [d == "min" for m, d in objs if m != metric],
        )
        best[metric] = order.iloc[0]
    return best


def status_counts(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials per status, with how many of them are feasible."""
    if trials.empty:
        return pd.DataFrame({"status": [], "trials": [], "feasible": []})
    grouped = trials.groupby("status", sort=True)["feasible"]
    return pd.DataFrame({"trials": grouped.size(), "feasible": grouped.sum()}).reset_index()


def failures(trials: pd.DataFrame) -> pd.DataFrame:
    """Every trial that is not feasible, with why (status, reason, error)."""
    failed = trials[~trials["feasible"].astype(bool)]
    columns = ["trial_id", "status", "infeasible_reason", "peak_memory_bytes", "error"]
    return failed[columns]


def fmt(value: Any) -> str:
    """One table cell: short floats, sizes stay integers, missing is blank."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)
