"""The metrics every trial reports, feasibility, and the objectives Optuna sees.

Optuna ignores the constraints of FAILED or PRUNED trials, so an infeasible trial (over the
memory budget, OOM, diverged) is told as COMPLETE with a clearly bad objective (0 for both
maximized objectives) and its memory violation; its real measurements stay in the
``images_per_second`` / ``val_accuracy`` / ``peak_memory_bytes`` keys for the report.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from tuner.engine.result import RunResult

__all__ = [
    "BAD_OBJECTIVE",
    "MEMORY_VIOLATION_KEY",
    "OBJECTIVE_KEYS",
    "objective_directions",
    "objective_metrics",
    "result_metrics",
    "trial_metrics",
]

# What Optuna maximizes, per objective; separate keys so infeasible trials keep their measurement.
OBJECTIVE_KEYS = {
    "throughput": "objective_images_per_second",
    "accuracy": "objective_val_accuracy",
}
BAD_OBJECTIVE = 0.0  # both objectives are maximized and never negative
MEMORY_VIOLATION_KEY = "memory_violation"  # Optuna constraint: > 0 means infeasible
_OOM_VIOLATION = 1.0  # an OOM without a measured peak counts as 100 % over budget
_STRING_KEYS = ("status", "error", "memory_kind", "device", "device_name", "torch_version",
                "cuda_version", "timm_version")  # fmt: skip
_SCALAR_KEYS = tuple(
    f.name
    for f in dataclasses.fields(RunResult)
    if not str(f.type).startswith(("list", "dict")) and f.name not in _STRING_KEYS
)


def objective_metrics(objective: str) -> list[str]:
    """The metric keys Optuna optimizes, in order: both for ``pareto``, else one."""
    if objective == "pareto":
        return [OBJECTIVE_KEYS["throughput"], OBJECTIVE_KEYS["accuracy"]]
    return [OBJECTIVE_KEYS[objective]]


def objective_directions(objective: str) -> list[str]:
    return ["max"] * len(objective_metrics(objective))


def result_metrics(result: RunResult | Mapping[str, Any]) -> dict[str, Any]:
    """The scalar fields of a ``RunResult`` (or a ``Progress``'s metrics), NaN / "" when missing."""
    values = result.to_dict() if isinstance(result, RunResult) else dict(result)
    metrics: dict[str, Any] = {key: _str(values.get(key)) for key in _STRING_KEYS}
    for key in _SCALAR_KEYS:
        metrics[key] = _number(values.get(key))
    return metrics


def trial_metrics(
    result: RunResult | Mapping[str, Any],
    *,
    max_memory_bytes: int | None,
    phase: str,
    node: str,
    engine_time_s: float,
    final: bool,
) -> dict[str, Any]:
    """Everything one ``tune.report`` carries: measurements, feasibility and objectives.

    Intermediate reports (``final=False``) of a healthy run count as feasible so far.
    """
    metrics = result_metrics(result)
    feasible, reason = judge(metrics, max_memory_bytes=max_memory_bytes)
    metrics.update(
        feasible=feasible,
        infeasible_reason=reason,
        phase=phase,
        final=final,
        node=node,
        engine_time_s=float(engine_time_s),
        max_memory_bytes=_number(max_memory_bytes),
    )
    metrics[MEMORY_VIOLATION_KEY] = memory_violation(metrics, max_memory_bytes=max_memory_bytes)
    throughput, accuracy = metrics["images_per_second"], metrics["val_accuracy"]
    metrics[OBJECTIVE_KEYS["throughput"]] = _objective(throughput, feasible)
    metrics[OBJECTIVE_KEYS["accuracy"]] = _objective(accuracy, feasible)
    return metrics


def judge(metrics: Mapping[str, Any], *, max_memory_bytes: int | None) -> tuple[bool, str]:
    """``(feasible, reason)``: a failed run or one whose peak memory is over budget is not."""
    status = metrics["status"]
    if status != "ok":
        detail = f": {metrics['error']}" if metrics.get("error") else ""
        return False, f"{status}{detail}"[:300]
    peak = metrics["peak_memory_bytes"]
    if max_memory_bytes is not None and not math.isnan(peak) and peak > max_memory_bytes:
        return False, (
            f"peak memory {peak / 2**20:.1f} MiB over the budget {max_memory_bytes / 2**20:.1f} MiB"
        )
    return True, ""


def memory_violation(metrics: Mapping[str, Any], *, max_memory_bytes: int | None) -> float:
    """Optuna's constraint value: (peak - budget) / budget; > 0 is infeasible.

    An OOM is infeasible even when its peak was not measured; without a budget only OOMs
    violate.
    """
    peak = metrics["peak_memory_bytes"]
    oom = metrics["status"] == "oom"
    if max_memory_bytes is None or math.isnan(peak):
        return _OOM_VIOLATION if oom else -1.0
    violation = (peak - max_memory_bytes) / max_memory_bytes
    return max(violation, _OOM_VIOLATION) if oom else violation


def _objective(value: float, feasible: bool) -> float:
    return value if feasible and math.isfinite(value) else BAD_OBJECTIVE


def _number(value: Any) -> float:
    if value is None or isinstance(value, str):
        return math.nan
    return float(value)


def _str(value: Any) -> str:
    return "" if value is None else str(value)
