"""Trustworthy throughput: re-measure the top candidates alone, interleaved, until they separate.

Trials that ran side by side (or shared a GPU) measured each other's interference, and one
figure per trial carries the machine's noise. After the search the candidates run again in one
Ray task holding a trial's CPUs and a whole GPU, round-robin (A, B, C, A, B, C, ...), each
measurement a fresh build (:func:`tuner.engine.probe`), after one discarded warm-up. From
``min_repeats`` on, it stops as soon as every two candidates adjacent in speed are separated
(the paired ratio's interval excludes 1x) and otherwise goes on to ``max_repeats``; candidates
still inseparable then are ties, and the report says so. ``remeasure.csv`` keeps every repeat.
"""

from __future__ import annotations

import csv
import itertools
import statistics
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from tuner.stats import paired_ratio

__all__ = ["REMEASURE_COLUMNS", "remeasure", "separated", "write_remeasure_csv"]

REMEASURE_COLUMNS = [
    "trial_id",
    "rank",
    "repeat",
    "status",
    "images_per_second",
    "images_per_second_low",
    "images_per_second_high",
    "step_time_s",
    "peak_memory_bytes",
    "memory_kind",
    "measured_steps",
    "device",
    "error",
]


def remeasure(
    candidates: Sequence[tuple[str, dict[str, Any]]],
    *,
    steps: int,
    min_repeats: int,
    max_repeats: int,
    num_cpus: float,
    threads: int,
    num_gpus: float,
    device: str,
    search_only: Collection[str],
) -> list[dict[str, Any]]:
    """Re-measure ``(trial_id, trial config)`` pairs in one Ray task; one row per repeat."""
    import ray

    task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_measure_all)
    configs = [config for _, config in candidates]
    measured = ray.get(
        task.remote(configs, steps, min_repeats, max_repeats, device, threads, sorted(search_only))
    )
    return [{"trial_id": candidates[index][0], "rank": index + 1, **row} for index, row in measured]


def separated(samples: Sequence[Sequence[float]]) -> bool:
    """Whether every two candidates adjacent in median speed are told apart by their paired
    ratio (repeat ``r`` of each forms a pair)."""
    order = sorted(range(len(samples)), key=lambda i: statistics.median(samples[i] or [0.0]))
    return all(not paired_ratio(samples[a], samples[b]).tie for a, b in itertools.pairwise(order))


def write_remeasure_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REMEASURE_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _measure_all(
    configs: list[dict[str, Any]],
    steps: int,
    min_repeats: int,
    max_repeats: int,
    device: str,
    threads: int,
    search_only: list[str],
) -> list[tuple[int, dict[str, Any]]]:
    import torch

    from tuner.config import TrainConfig
    from tuner.engine import probe

    torch.set_num_threads(max(1, threads))
    train_configs = [
        TrainConfig.from_params(
            {**c, **({"device": "cpu"} if device == "cpu" else {})}, ignore=search_only
        )
        for c in configs
    ]
    probe(train_configs[0], steps=steps)  # discarded: the process's one-time start-up
    rows: list[tuple[int, dict[str, Any]]] = []
    samples: list[list[float]] = [[] for _ in configs]
    for repeat in range(max_repeats):
        for index, train_config in enumerate(train_configs):
            result = probe(train_config, steps=steps)
            samples[index].append(result.images_per_second or float("nan"))
            rows.append((index, {"repeat": repeat, **_row(result)}))
        if repeat + 1 >= min_repeats and (len(configs) < 2 or separated(samples)):
            break
    return rows


def _row(result: Any) -> dict[str, Any]:
    return {
        "status": result.status,
        "images_per_second": result.images_per_second,
        "images_per_second_low": result.images_per_second_low,
        "images_per_second_high": result.images_per_second_high,
        "step_time_s": result.step_time_s,
        "peak_memory_bytes": result.peak_memory_bytes,
        "memory_kind": result.memory_kind,
        "measured_steps": result.measured_steps,
        "device": result.device,
        "error": result.error or "",
    }
