"""Trustworthy throughput: re-measure the top Pareto candidates, one at a time, a few repeats each.

Trials that ran side by side (or shared a GPU) measured each other's interference. After the
search the candidates run again, one at a time, in one Ray task holding a trial's CPUs and a
whole GPU: ``repeats`` fresh probes each (model built anew every time), and ``remeasure.csv``
keeps every repeat so the report can show the spread.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "TrialRecord",
    "pareto_front",
    "pick_candidates",
    "remeasure",
    "summarize",
    "write_remeasure_csv",
]


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial as the driver sees it: Ray's id, config and final metrics."""

    trial_id: str
    config: dict[str, Any]
    metrics: dict[str, Any]
    ray_status: str  # TERMINATED | ERROR | ...

    @property
    def usable(self) -> bool:
        """Ran to its end (not stopped early), feasible, with both objectives measured."""
        m = self.metrics
        return (
            self.ray_status == "TERMINATED"
            and bool(m.get("feasible"))
            and bool(m.get("final"))
            and _finite(m.get("images_per_second"))
            and _finite(m.get("val_accuracy"))
        )


def pick_candidates(
    records: Sequence[TrialRecord], *, objective: str, top: int
) -> list[TrialRecord]:
    """The best ``top`` usable trials: by Pareto rank (then accuracy) or by the one objective."""
    pool = [r for r in records if r.usable]
    if objective != "pareto":
        key = "images_per_second" if objective == "throughput" else "val_accuracy"
        return sorted(pool, key=lambda r: -r.metrics[key])[:top]
    chosen: list[TrialRecord] = []
    while pool and len(chosen) < top:
        front = pareto_front(pool)
        chosen += front[: top - len(chosen)]
        pool = [r for r in pool if r not in front]
    return chosen


def pareto_front(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The usable trials no other usable trial beats on both throughput and accuracy."""
    pool = [r for r in records if r.usable]
    front = [r for r in pool if not any(_dominates(o, r) for o in pool)]
    return sorted(front, key=lambda r: -r.metrics["val_accuracy"])


def remeasure(
    candidates: Sequence[TrialRecord],
    *,
    steps: int,
    repeats: int,
    num_cpus: float,
    threads: int,
    num_gpus: float,
    device: str,
) -> list[dict[str, Any]]:
    """Re-measure the candidates alone, in one Ray task; one row per repeat.

    The task first runs one discarded probe (a fresh process pays one-time start-up costs in
    its first steps), then the repeats round-robin over the candidates, so a slow drift of
    the machine spreads over all of them instead of biasing one.
    """
    import ray

    task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_measure_all)
    configs = [record.config for record in candidates]
    measured = ray.get(task.remote(configs, steps, repeats, device, threads))
    return [
        {"trial_id": candidates[index].trial_id, "rank": index + 1, **row}
        for index, row in measured
    ]


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per trial id: mean, std (n-1) and count of the re-measured images/s."""
    by_trial: dict[str, list[float]] = {}
    for row in rows:
        if _finite(row.get("images_per_second")):
            by_trial.setdefault(row["trial_id"], []).append(float(row["images_per_second"]))
    return {
        trial_id: {
            "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else math.nan,
            "n": float(len(values)),
        }
        for trial_id, values in by_trial.items()
    }


def write_remeasure_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    columns = [
        "trial_id", "rank", "repeat", "status", "images_per_second", "step_time_s",
        "peak_memory_bytes", "memory_kind", "measured_steps", "device", "error",
    ]  # fmt: skip
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _measure_all(
    configs: list[dict[str, Any]], steps: int, repeats: int, device: str, threads: int
) -> list[tuple[int, dict[str, Any]]]:
    import torch

    from tuner.engine import probe
    from tuner.search.trainable import train_config_of

    torch.set_num_threads(max(1, threads))
    train_configs = [train_config_of(config, device=device) for config in configs]
    probe(train_configs[0], steps=steps)  # discarded: the process's one-time start-up
    rows = []
    for repeat in range(repeats):
        for index, train_config in enumerate(train_configs):
            rows.append((index, {"repeat": repeat, **_row(probe(train_config, steps=steps))}))
    return rows


def _row(result: Any) -> dict[str, Any]:
    return {
        "status": result.status,
        "images_per_second": result.images_per_second,
        "step_time_s": result.step_time_s,
        "peak_memory_bytes": result.peak_memory_bytes,
        "memory_kind": result.memory_kind,
        "measured_steps": result.measured_steps,
        "device": result.device,
        "error": result.error or "",
    }


def _dominates(a: TrialRecord, b: TrialRecord) -> bool:
    keys = ("images_per_second", "val_accuracy")
    at_least = all(a.metrics[k] >= b.metrics[k] for k in keys)
    return at_least and any(a.metrics[k] > b.metrics[k] for k in keys)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
