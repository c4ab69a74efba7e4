"""What every ``tune.report`` of a trial carries: measurements, what ran, feasibility.

Every report has the same keys (Ray's loggers and schedulers need that): the scalar fields of
the engine's ``RunResult`` (NaN / "" when missing), ``effective_<field>`` for every registry
knob (what actually ran: a technique that fell back reads its fallback value), ``notes`` (the
engine's fallback notes as one string), and the search's own keys: ``phase``, ``final``,
``feasible``, ``infeasible_reason``, ``memory_violation``, ``max_memory_bytes``, ``node``,
``engine_time_s`` and ``step`` (the training step, the x-axis of every logger).

Optuna is told the measured objectives themselves (``images_per_second``, ``val_accuracy``),
for infeasible trials too, with the memory constraint beside them; feasibility and the
constraint come from :mod:`tuner.objectives`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from tuner.engine.result import RunResult
from tuner.objectives import MEMORY_VIOLATION_KEY, judge, memory_violation, objectives_of
from tuner.techniques import KNOBS
from tuner.units import as_number

__all__ = [
    "EFFECTIVE_PREFIX",
    "MEMORY_VIOLATION_KEY",
    "NO_MEASUREMENT",
    "STEP_KEY",
    "objective_directions",
    "objective_metrics",
    "result_metrics",
    "trial_metrics",
]

EFFECTIVE_PREFIX = "effective_"
STEP_KEY = "step"  # the training step of a report: the x-axis of TensorBoard, MLflow, ...
# What Optuna is told for an objective an infeasible trial never measured (the accuracy of a
# trial stopped by its feasibility check; anything of an OOM before its first step): 0 is the
# worst value of both maximized objectives, so no client reads it as a best trial, and the
# trial's memory violation > 0 makes it infeasible to Optuna.
NO_MEASUREMENT = 0.0
_STRING_KEYS = ("status", "error", "memory_kind", "device", "device_name", "torch_version",
                "cuda_version", "timm_version")  # fmt: skip
_SCALAR_KEYS = tuple(
    f.name
    for f in dataclasses.fields(RunResult)
    if not str(f.type).startswith(("list", "dict")) and f.name not in _STRING_KEYS
)


def objective_metrics(objective: str) -> list[str]:
    """The metric keys Optuna optimizes, in order: both for ``pareto``, else one."""
    return [metric for metric, _ in objectives_of(objective)]


def objective_directions(objective: str) -> list[str]:
    return [direction for _, direction in objectives_of(objective)]


def result_metrics(result: RunResult | Mapping[str, Any]) -> dict[str, Any]:
    """The scalar fields of a ``RunResult`` (or a ``Progress``'s result), NaN / "" when missing,
    plus ``effective_<field>`` per registry knob and the ``notes`` as one string."""
    values = result.to_dict() if isinstance(result, RunResult) else dict(result)
    metrics: dict[str, Any] = {key: _str(values.get(key)) for key in _STRING_KEYS}
    for key in _SCALAR_KEYS:
        metrics[key] = as_number(values.get(key))
    effective = values.get("effective") or {}
    for entry in KNOBS:
        value = effective.get(entry.field)
        metrics[EFFECTIVE_PREFIX + entry.field] = "" if value is None else _flat(value)
    metrics["notes"] = " | ".join(values.get("notes") or [])
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
    """Everything one ``tune.report`` carries: measurements, what ran, feasibility.

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
        max_memory_bytes=as_number(max_memory_bytes),
    )
    metrics[STEP_KEY] = int(metrics["steps"]) if math.isfinite(metrics["steps"]) else 0
    metrics[MEMORY_VIOLATION_KEY] = memory_violation(metrics, max_memory_bytes=max_memory_bytes)
    return metrics


def _flat(value: Any) -> Any:
    """A value Ray's loggers store as a scalar (bool/int/float/str)."""
    return value if isinstance(value, bool | int | float | str) else str(value)


def _str(value: Any) -> str:
    return "" if value is None else str(value)
