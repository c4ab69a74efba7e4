"""Objectives (a metric and its direction; ``--objective`` names which Optuna optimises),
feasibility (a run that finished ok within the memory budget) and the Pareto front: one owner
for search, summary and report. The functions over a table take the candidates
(:func:`tuner.record.is_candidate`) and keep those that measured every objective. Ray-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from tuner.units import as_number, format_bytes

if TYPE_CHECKING:  # numpy and pandas load on first use: the CLI imports this module for --help
    import numpy as np
    import pandas as pd

__all__ = [
    "OBJECTIVE_NAMES",
    "Objective",
    "ObjectiveName",
    "best_per_objective",
    "judge",
    "measured_mask",
    "memory_violation",
    "nondominated_ranks",
    "objective_directions",
    "objective_metrics",
    "objectives_of",
    "pareto_front",
    "pareto_mask",
    "rank_candidates",
    "report_objectives",
    "told_violation",
]

ObjectiveName = Literal["pareto", "throughput", "accuracy"]
OBJECTIVE_NAMES: tuple[str, ...] = get_args(ObjectiveName)
Objective = tuple[str, str]  # (metric, "max" | "min")

THROUGHPUT: Objective = ("images_per_second", "max")
ACCURACY: Objective = ("val_accuracy", "max")
DEFAULT_OBJECTIVES: list[Objective] = [THROUGHPUT, ACCURACY]
_NAMED: dict[str, list[Objective]] = {
    "pareto": DEFAULT_OBJECTIVES,
    "throughput": [THROUGHPUT],
    "accuracy": [ACCURACY],
}
OOM_VIOLATION = 1.0  # an OOM without a measured peak counts as 100 % over budget


def objectives_of(name: str) -> list[Objective]:
    """What ``--objective NAME`` optimises, in order."""
    return list(_NAMED[name])


def objective_metrics(name: str) -> list[str]:
    """The metric keys Optuna optimizes for ``--objective NAME``, in order."""
    return [metric for metric, _ in objectives_of(name)]


def objective_directions(name: str) -> list[str]:
    """Their directions ("max" | "min"), in the same order."""
    return [direction for _, direction in objectives_of(name)]


def report_objectives(metadata: Mapping[str, Any]) -> list[Objective]:
    """The objectives an experiment's metadata names, completed to throughput and accuracy (the
    report shows both, so the front and the recommendations stay comparable)."""
    raw = metadata.get("objectives", metadata.get("objective"))
    parsed: list[Objective] = []
    if isinstance(raw, str):
        parsed = list(_NAMED.get(raw, DEFAULT_OBJECTIVES))
    elif isinstance(raw, list):
        for item in raw:
            if isinstance(item, Mapping) and item.get("metric"):
                parsed.append((str(item["metric"]), str(item.get("direction", "max"))))
    for default in DEFAULT_OBJECTIVES:
        if default[0] not in {m for m, _ in parsed}:
            parsed.append(default)
    return parsed


# ---- feasibility -----------------------------------------------------------------------------


def judge(metrics: Mapping[str, Any], *, max_memory_bytes: float | None) -> tuple[bool, str]:
    """``(feasible, reason)``: a failed run, or one whose peak memory is over budget, is not."""
    status = str(metrics.get("status") or "")
    if status != "ok":
        detail = f": {metrics['error']}" if metrics.get("error") else ""
        return False, f"{status or 'no result'}{detail}"[:300]
    peak = as_number(metrics.get("peak_memory_bytes"))
    if max_memory_bytes is not None and not math.isnan(peak) and peak > max_memory_bytes:
        return False, (
            f"peak memory {format_bytes(peak)} over the budget {format_bytes(max_memory_bytes)}"
        )
    return True, ""


def memory_violation(metrics: Mapping[str, Any], *, max_memory_bytes: float | None) -> float:
    """Optuna's constraint value: (peak - budget) / budget; > 0 is infeasible. An OOM always
    violates; without a budget nothing else does (-1); an unmeasured peak is NaN, never a
    number: no client may show a value nobody measured."""
    peak = as_number(metrics.get("peak_memory_bytes"))
    oom = metrics.get("status") == "oom"
    if oom and (max_memory_bytes is None or math.isnan(peak)):
        return OOM_VIOLATION
    if math.isnan(peak):
        return math.nan
    if max_memory_bytes is None:
        return -1.0
    violation = (peak - max_memory_bytes) / max_memory_bytes
    return max(violation, OOM_VIOLATION) if oom else violation


# ---- dominance -------------------------------------------------------------------------------


def _as_max(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    import numpy as np

    signs = np.array([1.0 if d == "max" else -1.0 for d in directions])
    return np.asarray(values, dtype=float).reshape(-1, len(signs)) * signs


def pareto_mask(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """For each row of ``values`` (points x objectives), whether no other row dominates it."""
    import numpy as np

    points = _as_max(values, directions)
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    better_eq = np.all(points[:, None, :] >= points[None, :, :], axis=2)
    strictly = np.any(points[:, None, :] > points[None, :, :], axis=2)
    dominated = np.any(better_eq & strictly, axis=0)  # [i, j]: i dominates j
    return ~dominated


def nondominated_ranks(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """Rank 0 for the Pareto front, 1 for the front of what is left, and so on."""
    import numpy as np

    points = _as_max(values, directions)
    ranks = np.full(len(points), -1)
    rank, left = 0, np.arange(len(points))
    while len(left):
        front = pareto_mask(points[left], ["max"] * points.shape[1])
        ranks[left[front]] = rank
        left, rank = left[~front], rank + 1
    return ranks


# ---- over a trials table ---------------------------------------------------------------------


def measured_mask(trials: pd.DataFrame, objs: Sequence[Objective]) -> pd.Series:
    """The rows that measured every objective (a finite number each)."""
    import numpy as np
    import pandas as pd

    mask = pd.Series(True, index=trials.index)
    for metric, _ in objs:
        mask &= np.isfinite(pd.to_numeric(trials[metric], errors="coerce").astype(float))
    return mask


def pareto_front(pool: pd.DataFrame, objs: Sequence[Objective]) -> pd.DataFrame:
    """The non-dominated rows of ``pool`` (the candidates), best first on the first objective."""
    pool = pool[measured_mask(pool, objs)]
    if pool.empty:
        return pool
    keep = pareto_mask(pool[[m for m, _ in objs]].to_numpy(dtype=float), [d for _, d in objs])
    first, direction = objs[0]
    return pool[keep].sort_values(first, ascending=direction == "min")


def rank_candidates(
    pool: pd.DataFrame, objs: Sequence[Objective], *, top: int, then: str | None = None
) -> pd.DataFrame:
    """The best ``top`` of ``pool`` (the candidates): by non-dominated rank, then by the column
    ``then`` (ascending: a time) or, without it, by the last objective."""
    pool = pool[measured_mask(pool, objs)]
    if pool.empty or top <= 0:
        return pool.head(0)
    values = pool[[m for m, _ in objs]].to_numpy(dtype=float)
    ranks = nondominated_ranks(values, [d for _, d in objs])
    last, direction = objs[-1] if then is None else (then, "min")
    ordered = pool.assign(_rank=ranks).sort_values(
        ["_rank", last], ascending=[True, direction == "min"]
    )
    return ordered.drop(columns="_rank").head(top)


def best_per_objective(pool: pd.DataFrame, objs: Sequence[Objective]) -> dict[str, pd.Series]:
    """For each objective, the row of ``pool`` (the candidates) that is best on it (ties: better
    on the others)."""
    pool = pool[measured_mask(pool, objs)]
    best: dict[str, pd.Series] = {}
    for metric, direction in objs if not pool.empty else ():
        others = [(m, d) for m, d in objs if m != metric]
        order = pool.sort_values(
            [metric, *(m for m, _ in others)],
            ascending=[direction == "min", *(d == "min" for _, d in others)],
        )
        best[metric] = order.iloc[0]
    return best


def told_violation(value: Any) -> float:
    """The constraint Optuna is told: -1 (feasible) for a trial that measured none, so it does
    not bias the model (its record keeps NaN)."""
    violation = as_number(value)
    return -1.0 if math.isnan(violation) else violation
